//! TLS for clients against a real `warden server`: certificates made here with the `openssl`
//! CLI (and `keytool` for JKS), clients through `zookeeper-client` over rustls, raw rustls
//! connections, and `openssl s_client` for X.509 v1 client certificates (rustls clients cannot
//! send those). Mutual TLS and the x509 ACL scheme, PEM, PKCS#12 and JKS stores, refused
//! certificates (none, another CA, expired), port unification, plain and TLS on the wrong
//! port, handshakes cut halfway, garbage, reload after the files change, and start errors.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use support::pki::{PASSWORD, Pki};
use support::warden::{Warden, closed_by_server, handshake, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zookeeper_client::{Acls, AuthId, AuthUser, CreateMode, Error, Permission};

const CLIENT_DN: &str = "CN=client,OU=test,O=Warden";
/// A subject with every kind of thing RFC 2253 escapes, a multi-valued RDN, domain components,
/// an attribute without an RFC 2253 keyword and a non-ASCII value (openssl's `-subj` form) ...
const ODD_SUBJECT: &str = r#"/DC=org/DC=example/O=Acme, Inc./OU=ops+UID=u42/CN= #lead;x<y>"q"\\z /emailAddress=ops@example.org/ST=Zürich"#;
/// ... and the x509 id ZooKeeper gives it: what Java's `X500Principal.getName()` printed for
/// the same certificate (OpenJDK 17).
const ODD_DN: &str = r##"ST=Zürich,1.2.840.113549.1.9.1=#160f6f7073406578616d706c652e6f7267,CN=\ \#lead\;x\<y\>\"q\"\\z\ ,OU=ops+UID=u42,O=Acme\, Inc.,DC=example,DC=org"##;

/// A CA, a server certificate for 127.0.0.1 and client certificates, made with openssl.
fn make_pki(dir: &Path) -> Pki {
    let pki = Pki::empty(dir);
    pki.ca("ca", "Test CA");
    pki.ca("other-ca", "Other CA");
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    pki.leaf("server", "ca", "/CN=localhost", Some("server.ext"), "30");
    pki.leaf(
        "client",
        "ca",
        "/O=Warden/OU=test/CN=client",
        Some("client.ext"),
        "30",
    );
    pki.leaf("other", "ca", "/CN=other", Some("client.ext"), "30");
    pki.leaf(
        "stranger",
        "other-ca",
        "/CN=stranger",
        Some("client.ext"),
        "30",
    );
    pki.leaf("expired", "ca", "/CN=expired", Some("client.ext"), "-1");
    // X.509 v1, as kazoo's harness makes them: no extensions.
    pki.leaf("server-v1", "ca", "/CN=localhost", None, "30");
    pki.leaf("client-v1", "ca", "/CN=client v1,O=kazoo", None, "30");
    pki.leaf("odd", "ca", ODD_SUBJECT, Some("client.ext"), "30");
    pki
}

fn install_provider() {
    // zookeeper-client builds its rustls config with the process's default provider; the
    // tests have two compiled in (ring, aws-lc-rs), so one is named.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// zoo.cfg lines for a secure client port on `port` with PEM stores.
fn pem_tls(pki: &Pki, port: u16) -> String {
    format!(
        "secureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n\
         serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n\
         ssl.keyStore.location={}\nssl.trustStore.location={}\n\
         ssl.handshakeDetectionTimeoutMillis=1000\n",
        pki.path("server-bundle.pem").display(),
        pki.path("ca.pem").display(),
    )
}

/// A zookeeper-client session over TLS, with the client certificate `identity` if any.
async fn tls_client(
    pki: &Pki,
    port: u16,
    identity: Option<&str>,
) -> Result<zookeeper_client::Client, Error> {
    install_provider();
    let mut options = zookeeper_client::TlsOptions::new().with_pem_ca(&pki.read("ca.pem"))?;
    if let Some(name) = identity {
        options = options.with_pem_identity(
            &pki.read(&format!("{name}.pem")),
            &pki.read(&format!("{name}.key")),
        )?;
    }
    let servers = format!("127.0.0.1:{port}");
    let connecting = zookeeper_client::Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .with_tls(options)
        .secure_connect(&servers);
    tokio::time::timeout(Duration::from_secs(10), connecting)
        .await
        .unwrap_or(Err(Error::Timeout))
}

/// A raw TLS connection trusting `ca.pem`, showing `identity`: sends `ruok` and returns the
/// answer, or "" if the server refused the connection at any point.
async fn tls_ruok(pki: &Pki, port: u16, identity: Option<&str>) -> String {
    install_provider();
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(pki.path("ca.pem")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let config = match identity {
        Some(name) => {
            let chain =
                rustls_pki_types::CertificateDer::pem_file_iter(pki.path(&format!("{name}.pem")))
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect();
            let key =
                rustls_pki_types::PrivateKeyDer::from_pem_file(pki.path(&format!("{name}.key")))
                    .unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let attempt = async {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut tls = connector.connect(name, tcp).await.ok()?;
        tls.write_all(b"ruok").await.ok()?;
        let mut answer = String::new();
        tls.read_to_string(&mut answer).await.ok()?;
        Some(answer)
    };
    tokio::time::timeout(Duration::from_secs(10), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// `ruok` through `openssl s_client`, which can show an X.509 v1 client certificate.
fn s_client_ruok(pki: &Pki, port: u16, cert: &str) -> String {
    let mut child = Command::new("timeout")
        .args(["10", "openssl", "s_client", "-quiet", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-CAfile", pki.path("ca.pem").to_str().unwrap()])
        .args(["-cert", pki.path(&format!("{cert}.pem")).to_str().unwrap()])
        .args(["-key", pki.path(&format!("{cert}.key")).to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_client");
    child.stdin.take().unwrap().write_all(b"ruok").unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn free_port() -> u16 {
    support::servers::free_port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_gives_the_x509_identity_for_acls_and_whoami() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let secure = free_port();
    let warden = Warden::start(&format!(
        "{}authProvider.1=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n",
        pem_tls(&pki, secure)
    ));

    let client = tls_client(&pki, secure, Some("client")).await.unwrap();
    let users = client.list_auth_users().await.unwrap();
    assert!(
        users.contains(&AuthUser::new("x509", CLIENT_DN)),
        "whoami: {users:?}"
    );
    let mine = [zookeeper_client::Acl::new(
        Permission::ALL,
        AuthId::new("x509", CLIENT_DN),
    )];
    client
        .create(
            "/mine",
            b"secret",
            &CreateMode::Persistent.with_acls(Acls::new(&mine)),
        )
        .await
        .unwrap();
    assert_eq!(client.get_data("/mine").await.unwrap().0, b"secret");

    // The subject written as Java writes it, escapes and all.
    let odd = tls_client(&pki, secure, Some("odd")).await.unwrap();
    let users = odd.list_auth_users().await.unwrap();
    assert!(
        users.contains(&AuthUser::new("x509", ODD_DN)),
        "whoami: {users:?}"
    );

    // Another certificate of the same CA is another identity.
    let other = tls_client(&pki, secure, Some("other")).await.unwrap();
    assert!(matches!(other.get_data("/mine").await, Err(Error::NoAuth)));
    // A plain client on the plain port: no x509 identity either.
    let plain = support::warden::client(&warden).await;
    assert!(matches!(plain.get_data("/mine").await, Err(Error::NoAuth)));

    // The admin server tells the secure connections apart and counts the plain ones.
    let connections =
        support::http::get(warden.admin_addr(), "/commands/connections", &[]).unwrap();
    let body: serde_json::Value = serde_json::from_str(&connections.body).unwrap();
    assert_eq!(
        body["secure_connections"].as_array().unwrap().len(),
        3,
        "{body}"
    );
    assert!(
        !body["connections"].as_array().unwrap().is_empty(),
        "{body}"
    );
    let stats = support::http::get(warden.admin_addr(), "/commands/server_stats", &[]).unwrap();
    let body: serde_json::Value = serde_json::from_str(&stats.body).unwrap();
    assert!(
        body["server_stats"]["non_mtlslocal_conn_count"]
            .as_u64()
            .unwrap()
            >= 1,
        "{body}"
    );
    assert!(
        warden
            .four_letter("conf")
            .contains(&format!("secureClientPort={secure}\n")),
        "conf"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pkcs12_and_jks_stores() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let stores = [
        (pki.pkcs12("server"), pki.trust("ca", "JKS", "jks"), ""),
        (pki.jks_key("server"), pki.trust("ca", "PKCS12", "p12"), ""),
        // Types named rather than guessed from the extension.
        (
            pki.pkcs12("server"),
            pki.trust("ca", "JKS", "jks"),
            "ssl.keyStore.type=PKCS12\nssl.trustStore.type=jks\n",
        ),
    ];
    for (key_store, trust_store, types) in stores {
        let secure = free_port();
        let _warden = Warden::start(&format!(
            "secureClientPort={secure}\nssl.keyStore.location={}\n\
             ssl.keyStore.password={PASSWORD}\nssl.trustStore.location={}\n\
             ssl.trustStore.password={PASSWORD}\n{types}",
            key_store.display(),
            trust_store.display()
        ));
        let client = tls_client(&pki, secure, Some("client")).await.unwrap();
        client
            .create("/p", b"", &support::warden::persistent())
            .await
            .unwrap();
        assert!(client.check_stat("/p").await.unwrap().is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_the_server_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let secure = free_port();
    let warden = Warden::start(&pem_tls(&pki, secure));
    assert_eq!(tls_ruok(&pki, secure, Some("client")).await, "imok");
    // ssl.clientAuth=need (ZooKeeper's default): no certificate, one of another CA, an
    // expired one.
    for identity in [None, Some("stranger"), Some("expired")] {
        assert_eq!(tls_ruok(&pki, secure, identity).await, "", "{identity:?}");
    }
    // The client may see the alert before the server has written its line.
    wait_for("the refusals logged", Duration::from_secs(10), || {
        let log = warden.log();
        log.contains("peer sent no certificates")
            && log.contains("UnknownIssuer")
            && log.contains("Expired")
    });
    assert_eq!(tls_ruok(&pki, secure, Some("client")).await, "imok");

    // want: a client without a certificate is served, one with a bad one is not.
    let want = free_port();
    let _want = Warden::start(&format!("{}ssl.clientAuth=want\n", pem_tls(&pki, want)));
    assert_eq!(tls_ruok(&pki, want, None).await, "imok");
    assert_eq!(tls_ruok(&pki, want, Some("stranger")).await, "");
    let anonymous = tls_client(&pki, want, None).await.unwrap();
    let users = anonymous.list_auth_users().await.unwrap();
    assert!(users.iter().all(|u| u.scheme() != "x509"), "{users:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x509_version_1_certificates_work_on_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let secure = free_port();
    let _warden = Warden::start(&format!(
        "secureClientPort={secure}\nssl.keyStore.location={}\nssl.trustStore.location={}\n",
        pki.path("server-v1-bundle.pem").display(),
        pki.path("ca.pem").display(),
    ));
    assert_eq!(s_client_ruok(&pki, secure, "client-v1"), "imok");
    assert_eq!(s_client_ruok(&pki, secure, "client"), "imok");
    assert_eq!(s_client_ruok(&pki, secure, "stranger"), "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_port_garbage_and_cut_handshakes_close_only_their_connection() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let secure = free_port();
    let warden = Warden::start(&pem_tls(&pki, secure));
    let healthy = tls_client(&pki, secure, Some("client")).await.unwrap();
    healthy
        .create("/ok", b"", &support::warden::persistent())
        .await
        .unwrap();

    // A plain ZooKeeper client on the TLS port.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", secure)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(&handshake(0, &[0; 16], 10_000, 0)).unwrap();
    assert!(closed_by_server(&mut raw), "plain client on the TLS port");
    // Garbage that looks like a TLS record, then garbage that does not.
    for garbage in [
        &[0x16u8, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5][..],
        &[0xff; 64][..],
    ] {
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", secure)).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        raw.write_all(garbage).unwrap();
        assert!(closed_by_server(&mut raw), "garbage {garbage:?}");
    }
    // Random records after a TLS record header, of random lengths (seeded: a failure
    // reproduces): each is refused by rustls and closed.
    let mut rng = fastrand::Rng::with_seed(12);
    for _ in 0..40 {
        let mut bytes = vec![0x16, 0x03, rng.u8(0..4)];
        let len = rng.usize(0..600);
        bytes.extend_from_slice(&(len as u16).to_be_bytes());
        bytes.extend((0..len).map(|_| rng.u8(..)));
        let mut raw = std::net::TcpStream::connect(("127.0.0.1", secure)).unwrap();
        raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = raw.write_all(&bytes);
        assert!(closed_by_server(&mut raw), "random record {bytes:?}");
    }
    // A handshake cut halfway: a record header promising more than comes; the handshake
    // timeout (ssl.handshakeDetectionTimeoutMillis=1000) ends it.
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", secure)).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    raw.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00])
        .unwrap();
    let started = std::time::Instant::now();
    assert!(closed_by_server(&mut raw), "cut handshake");
    assert!(started.elapsed() < Duration::from_secs(5));
    // A TLS client on the plain port (no port unification).
    assert_eq!(tls_ruok(&pki, warden.port, Some("client")).await, "");

    wait_for("the log lines", Duration::from_secs(10), || {
        warden
            .log()
            .contains("a TLS handshake on the plain client port")
    });
    let log = warden.log();
    for why in [
        "TLS handshake failed",
        "TLS handshake not done within 1000 ms",
        "a TLS handshake on the plain client port",
    ] {
        assert!(log.contains(why), "no {why:?} in\n{log}");
    }
    assert!(!log.contains("panicked"), "{log}");
    assert!(healthy.check_stat("/ok").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn port_unification_serves_tls_and_plain_on_one_port() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let warden = Warden::start(&format!(
        "client.portUnification=true\nssl.keyStore.location={}\nssl.trustStore.location={}\n\
         X509AuthenticationProvider.superUser={CLIENT_DN}\n",
        pki.path("server-bundle.pem").display(),
        pki.path("ca.pem").display(),
    ));
    let tls = tls_client(&pki, warden.port, Some("client")).await.unwrap();
    tls.create("/u", b"tls", &support::warden::persistent())
        .await
        .unwrap();
    let plain = support::warden::client(&warden).await;
    assert_eq!(plain.get_data("/u").await.unwrap().0, b"tls");
    assert_eq!(warden.four_letter("ruok"), "imok");
    assert_eq!(tls_ruok(&pki, warden.port, Some("client")).await, "imok");
    let users = tls.list_auth_users().await.unwrap();
    assert!(
        users.contains(&AuthUser::new("x509", CLIENT_DN)),
        "{users:?}"
    );
    // The configured super user (ZooKeeper's X509AuthenticationProvider.superUser) passes
    // every ACL: a node no one else may read.
    assert!(
        users.contains(&AuthUser::new("super", CLIENT_DN)),
        "{users:?}"
    );
    let nobody = [zookeeper_client::Acl::new(
        Permission::ALL,
        AuthId::new("digest", "nobody:x"),
    )];
    plain
        .create(
            "/closed",
            b"c",
            &CreateMode::Persistent.with_acls(Acls::new(&nobody)),
        )
        .await
        .unwrap();
    assert!(matches!(
        plain.get_data("/closed").await,
        Err(Error::NoAuth)
    ));
    assert_eq!(tls.get_data("/closed").await.unwrap().0, b"c");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_store_files_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(dir.path());
    let secure = free_port();
    let key_store = dir.path().join("live-key.pem");
    let trust_store = dir.path().join("live-trust.pem");
    std::fs::copy(pki.path("server-bundle.pem"), &key_store).unwrap();
    std::fs::copy(pki.path("ca.pem"), &trust_store).unwrap();
    let warden = Warden::start(&format!(
        "secureClientPort={secure}\nclient.certReload=true\nssl.keyStore.location={}\n\
         ssl.trustStore.location={}\n",
        key_store.display(),
        trust_store.display()
    ));
    assert_eq!(tls_ruok(&pki, secure, Some("client")).await, "imok");
    assert_eq!(tls_ruok(&pki, secure, Some("stranger")).await, "");

    // The trust store now trusts the other CA only.
    std::fs::copy(pki.path("other-ca.pem"), &trust_store).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while tls_ruok(&pki, secure, Some("stranger")).await != "imok" {
        assert!(std::time::Instant::now() < deadline, "not reloaded");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(tls_ruok(&pki, secure, Some("client")).await, "");

    // A broken file keeps the stores in use, with a log line.
    std::fs::write(&trust_store, "not a certificate").unwrap();
    wait_for("the reload failure logged", Duration::from_secs(10), || {
        warden.log().contains("keeping the previous ones")
    });
    assert_eq!(tls_ruok(&pki, secure, Some("stranger")).await, "imok");
}

/// A server process killed (by PID) when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zoo_cfg_with_only_a_secure_client_port_serves_tls_only() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(&dir.path().join("pki"));
    let port = free_port();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nsecureClientPort={port}\nsecureClientPortAddress=127.0.0.1\n\
             admin.enableServer=false\n4lw.commands.whitelist=*\n\
             ssl.keyStore.location={}\nssl.trustStore.location={}\n",
            dir.path().join("data").display(),
            pki.path("server-bundle.pem").display(),
            pki.path("ca.pem").display()
        ),
    )
    .unwrap();
    let log = dir.path().join("warden.log");
    let _server = Child(support::servers::spawn_logged(
        support::servers::warden_command(&cfg),
        &log,
    ));
    wait_for("the TLS port", Duration::from_secs(60), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let client = tls_client(&pki, port, Some("client")).await.unwrap();
    client
        .create("/only", b"tls", &support::warden::persistent())
        .await
        .unwrap();
    assert_eq!(tls_ruok(&pki, port, Some("client")).await, "imok");
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    plain.write_all(&handshake(0, &[0; 16], 10_000, 0)).unwrap();
    assert!(
        closed_by_server(&mut plain),
        "a plain client on the only, TLS, port"
    );
}

/// `--check-config` on a zoo.cfg with `lines`: its exit code and stderr.
fn check_config(dir: &Path, lines: &str) -> (i32, String) {
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort=2181\n{lines}",
            dir.join("data").display()
        ),
    )
    .unwrap();
    let out = support::servers::warden_command(&cfg)
        .arg("--check-config")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn settings_rustls_lacks_are_start_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pki = make_pki(&dir.path().join("pki"));
    let base = format!(
        "secureClientPort=2281\nssl.keyStore.location={}\nssl.trustStore.location={}\n",
        pki.path("server-bundle.pem").display(),
        pki.path("ca.pem").display()
    );
    assert_eq!(check_config(dir.path(), &base).0, 0);
    for (lines, says) in [
        (
            "ssl.ciphersuites=TLS_RSA_WITH_RC4_128_MD5\n",
            "TLS_RSA_WITH_RC4_128_MD5",
        ),
        ("ssl.enabledProtocols=TLSv1.1\n", "TLSv1.1"),
        ("ssl.protocol=SSLv3\n", "SSLv3"),
        ("ssl.clientAuth=maybe\n", "none, want or need"),
        ("ssl.crl=true\n", "CRL"),
        ("ssl.keyStore.type=BCFKS\n", "BCFKS"),
        (
            "ssl.ciphersuites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256\n",
            "no suite for TLSv1.3",
        ),
    ] {
        let (code, stderr) = check_config(dir.path(), &format!("{base}{lines}"));
        assert_eq!(code, 2, "{lines}: {stderr}");
        assert!(stderr.contains(says), "{lines}: {stderr}");
    }
    let jks_wrong_password = format!(
        "secureClientPort=2281\nssl.keyStore.location={}\nssl.keyStore.password=wrong\n\
         ssl.clientAuth=none\n",
        pki.jks_key("server").display()
    );
    let (code, stderr) = check_config(dir.path(), &jks_wrong_password);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("integrity check failed"), "{stderr}");
    let (code, stderr) = check_config(dir.path(), "secureClientPort=2281\nssl.clientAuth=none\n");
    assert_eq!(code, 2);
    assert!(stderr.contains("key store"), "{stderr}");
}
