//! TLS between the servers of a cluster (zoo.cfg `sslQuorum`, `portUnification`,
//! `ssl.quorum.*`) with real `warden server` processes on loopback: a cluster that replicates
//! over TLS; members showing a certificate of another CA, or one that does not name their
//! host, or an expired one, kept out at the handshake; a client without a certificate refused
//! on the quorum port; and ZooKeeper's rolling switch from plain to TLS (portUnification on
//! every member, then sslQuorum, then portUnification off), one member restarted at a time,
//! with writes between the steps and none lost.

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::cluster::{Cluster, Mode, Serving, System};
use support::pki::{PASSWORD, Pki};
use support::warden::persistent;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zookeeper_client as zk;

/// One cluster at a time.
static SERIAL: Mutex<()> = Mutex::new(());
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a member with a refused certificate is watched not joining: several election
/// timeouts of the clusters' 1 s tick.
const KEPT_OUT_FOR: Duration = Duration::from_secs(5);

/// A CA; peer certificates naming 127.0.0.1 from it and from another CA; one from it naming
/// another host only; an expired one. PKCS#12 key stores, the CA as a PEM trust store.
fn pki() -> Pki {
    let pki = Pki::scratch("quorum-pki");
    pki.ca("ca", "Quorum CA");
    pki.ca("other-ca", "Other CA");
    let usage = "extendedKeyUsage=serverAuth,clientAuth\n";
    std::fs::write(
        pki.path("peer.ext"),
        format!("subjectAltName=IP:127.0.0.1\n{usage}"),
    )
    .unwrap();
    std::fs::write(
        pki.path("elsewhere.ext"),
        format!("subjectAltName=DNS:elsewhere.example\n{usage}"),
    )
    .unwrap();
    pki.leaf("peer", "ca", "/CN=peer", Some("peer.ext"), "30");
    pki.leaf("stranger", "other-ca", "/CN=peer", Some("peer.ext"), "30");
    pki.leaf(
        "elsewhere",
        "ca",
        "/CN=elsewhere",
        Some("elsewhere.ext"),
        "30",
    );
    pki.leaf("expired", "ca", "/CN=peer", Some("peer.ext"), "-1");
    for name in ["peer", "stranger", "elsewhere", "expired"] {
        pki.pkcs12(name);
    }
    pki
}

/// The zoo.cfg lines of quorum TLS with the key store `key` (`peer`, `stranger`, ...).
fn tls_lines(pki: &Pki, key: &str) -> String {
    format!(
        "sslQuorum=true\nssl.quorum.keyStore.location={}\nssl.quorum.keyStore.password={PASSWORD}\n\
         ssl.quorum.trustStore.location={}\n",
        pki.path(&format!("{key}.p12")).display(),
        pki.path("ca.pem").display()
    )
}

/// Rewrites member `i`'s zoo.cfg (as the server left it) without the lines whose keys
/// `lines` sets, then with `lines`.
fn set_lines(cluster: &Cluster, i: usize, lines: &str) {
    let path = cluster.members[i].cfg_path();
    let keys: Vec<&str> = lines
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    let kept: String = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| {
            !keys
                .iter()
                .any(|k| l.split_once('=').is_some_and(|(key, _)| key == *k))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&path, kept + lines).unwrap();
}

/// Restarts member `i` with `lines` in its zoo.cfg.
fn restart_with(cluster: &mut Cluster, i: usize, lines: &str) {
    cluster.terminate(i);
    set_lines(cluster, i, lines);
    cluster.restart(i);
}

async fn connect(connect_string: &str) -> zk::Client {
    let connecting = zk::Client::connector()
        .with_session_timeout(SESSION_TIMEOUT)
        .connect(connect_string);
    tokio::time::timeout(2 * SESSION_TIMEOUT, connecting)
        .await
        .unwrap_or_else(|_| panic!("no session with {connect_string}"))
        .unwrap_or_else(|e| panic!("connecting to {connect_string}: {e}"))
}

/// Creates `path` through any member, retrying while the cluster elects.
async fn create(cluster: &Cluster, path: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let client = connect(&cluster.connect_string()).await;
        match client.create(path, path.as_bytes(), &persistent()).await {
            Ok(_) | Err(zk::Error::NodeExists) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("create {path}: {e}; again");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("create {path}: {e}"),
        }
    }
}

/// Every path in `paths`, with its data, read from each running member after a sync.
async fn check_everywhere(cluster: &Cluster, paths: &[String]) {
    for (i, member) in cluster.members.iter().enumerate() {
        let client = connect(&member.address()).await;
        client.sync("/").await.unwrap();
        for path in paths {
            let (data, _) = client
                .get_data(path)
                .await
                .unwrap_or_else(|e| panic!("server.{}: {path}: {e}", i + 1));
            assert_eq!(data, path.as_bytes(), "server.{}: {path}", i + 1);
        }
    }
}

/// Watches member `i` for KEPT_OUT_FOR: it must never serve, and some member's log must say
/// `why`.
fn assert_kept_out(cluster: &mut Cluster, i: usize, why: &str) {
    let until = Instant::now() + KEPT_OUT_FOR;
    while Instant::now() < until {
        let mode = cluster.members[i].mode();
        assert!(
            matches!(mode, Mode::NotServing | Mode::Down),
            "server.{} joined with a certificate that should keep it out: {mode:?}",
            i + 1
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let logs: String = (0..cluster.members.len())
        .map(|j| cluster.members[j].log_tail(400))
        .collect();
    assert!(logs.contains(why), "no log line says {why:?}:\n{logs}");
}

fn run(name: &str, test: impl std::future::Future<Output = ()>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let started = Instant::now();
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        tokio::select! {
            () = test => {}
            () = tokio::time::sleep(Duration::from_secs(150)) => panic!("{name} overran"),
        }
    });
    eprintln!("{name}: {:?}", started.elapsed());
}

#[test]
fn a_cluster_over_tls_keeps_out_peers_whose_certificates_do_not_hold() {
    run("quorum TLS", async {
        let pki = pki();
        let mut cluster = Cluster::start(System::Warden, 3, 0, &tls_lines(&pki, "peer"));
        let mut paths = Vec::new();
        for n in 0..3 {
            let path = format!("/over-tls-{n}");
            create(&cluster, &path).await;
            paths.push(path);
        }
        check_everywhere(&cluster, &paths).await;

        // A client without a certificate, trusting the CA, gets nothing from the quorum port.
        let leader = cluster.wait_for_leader(Duration::from_secs(10));
        let refused = without_certificate(&pki, &cluster.members[leader].quorum_address()).await;
        assert!(refused, "a TLS client without a certificate was let in");

        // A follower comes back with a certificate of another CA: the others refuse it.
        let follower = cluster.followers_of(leader)[0];
        restart_with(&mut cluster, follower, &tls_lines(&pki, "stranger"));
        assert_kept_out(&mut cluster, follower, "TLS handshake failed");
        // ... with an expired one of the right CA.
        restart_with(&mut cluster, follower, &tls_lines(&pki, "expired"));
        assert_kept_out(&mut cluster, follower, "invalid peer certificate: Expired");
        // ... with one of the right CA that names another host: it may dial the others, but
        // they cannot dial it.
        restart_with(&mut cluster, follower, &tls_lines(&pki, "elsewhere"));
        assert_kept_out(&mut cluster, follower, "not valid for name");
        // ... and with its own: it joins and catches up.
        restart_with(&mut cluster, follower, &tls_lines(&pki, "peer"));
        cluster.wait_until_serving(Serving::All, Duration::from_secs(20));
        create(&cluster, "/after-rejoin").await;
        paths.push("/after-rejoin".into());
        check_everywhere(&cluster, &paths).await;
    });
}

/// Whether a TLS client that trusts the CA but shows no certificate is refused by the quorum
/// port at `addr` (with TLS 1.3 the refusal comes as an alert on the first read).
async fn without_certificate(pki: &Pki, addr: &str) -> bool {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    let ca = std::fs::read(pki.path("ca.pem")).unwrap();
    for cert in rustls_pemfile_certs(&ca) {
        roots.add(cert).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let Ok(mut tls) = connector.connect(name, stream).await else {
        return true;
    };
    let _ = tls.write_all(b"hello?").await;
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf)).await,
        Ok(Err(_) | Ok(0))
    )
}

fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .map(|c| c.unwrap())
        .collect()
}

#[test]
fn a_rolling_switch_from_plain_to_tls_loses_nothing() {
    run("rolling switch to quorum TLS", async {
        let pki = pki();
        let mut cluster = Cluster::start(System::Warden, 3, 0, "");
        let mut paths = Vec::new();
        // Certificates that do not name 127.0.0.1, accepted because hostname verification is
        // off: it is the one setting that lets them in.
        let stores = tls_lines(&pki, "elsewhere").replace("sslQuorum=true\n", "");
        let steps = [
            format!("portUnification=true\nsslQuorum=false\n{stores}"),
            format!(
                "portUnification=true\nsslQuorum=true\nssl.quorum.hostnameVerification=false\n\
                 {stores}"
            ),
            format!(
                "portUnification=false\nsslQuorum=true\nssl.quorum.hostnameVerification=false\n\
                 {stores}"
            ),
        ];
        for (s, lines) in steps.iter().enumerate() {
            for i in 0..cluster.members.len() {
                restart_with(&mut cluster, i, lines);
                cluster.wait_until_serving(Serving::All, Duration::from_secs(20));
                let path = format!("/step-{s}-member-{i}");
                create(&cluster, &path).await;
                paths.push(path);
            }
        }
        check_everywhere(&cluster, &paths).await;
        // Every member now takes TLS peers only.
        let mut plain = tokio::net::TcpStream::connect(cluster.members[0].quorum_address())
            .await
            .unwrap();
        plain
            .write_all(b"\0\0\0\x30plain peer hello")
            .await
            .unwrap();
        let mut buf = [0u8; 64];
        let answer = tokio::time::timeout(Duration::from_secs(5), plain.read(&mut buf)).await;
        // rustls answers garbage with an alert record (type 21) or just closes.
        match answer {
            Ok(Ok(0)) | Ok(Err(_)) => {}
            Ok(Ok(n)) => assert_eq!(buf[0], 21, "a plain peer got {:?}", &buf[..n]),
            Err(_) => panic!("a plain peer was neither answered nor closed"),
        }
        // The refusal is logged just after the alert is sent.
        let member = &cluster.members[0];
        support::warden::wait_for("the refusal logged", Duration::from_secs(5), || {
            member.log_tail(100).contains("TLS handshake failed")
        });
    });
}
