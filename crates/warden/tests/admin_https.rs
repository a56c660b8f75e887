//! The admin server over HTTPS, as ZooKeeper's AdminServer serves it (`admin.forceHttps`,
//! `admin.portUnification`, `admin.needClientAuth`, with the `ssl.quorum.*` key material), on a
//! real `warden server`, with certificates made by openssl and a rustls client.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use support::http::{self, Reply};
use support::pki::Pki;
use support::servers::scratch_dir;
use support::warden::Warden;

fn pki() -> Pki {
    let pki = Pki::scratch("admin-https-pki");
    pki.ca("ca", "Admin CA");
    std::fs::write(pki.path("server.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(pki.path("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    pki.leaf("server", "ca", "/CN=admin", Some("server.ext"), "30");
    pki.leaf("operator", "ca", "/CN=operator", Some("client.ext"), "30");
    pki
}

fn https_lines(pki: &Pki, mode: &str) -> String {
    format!(
        "{mode}\nssl.quorum.keyStore.location={}\nssl.quorum.trustStore.location={}\n",
        pki.path("server-bundle.pem").display(),
        pki.path("ca.pem").display()
    )
}

/// `GET path` over TLS, trusting the test CA, showing the certificate `identity` if any.
fn get_tls(
    pki: &Pki,
    addr: SocketAddr,
    path: &str,
    identity: Option<&str>,
) -> std::io::Result<Reply> {
    let identity = identity.map(|name| {
        (
            pki.path(&format!("{name}.pem")),
            pki.path(&format!("{name}.key")),
        )
    });
    let client = http::tls_client(&pki.path("ca.pem"), identity, rustls::ALL_VERSIONS);
    http::get_tls(client, addr, path)
}

fn assert_ruok(reply: &Reply) {
    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(reply.body.contains("\"command\" : \"ruok\""), "{reply:?}");
}

#[test]
fn force_https_serves_https_only_with_hsts() {
    let pki = pki();
    let warden = Warden::start(&https_lines(&pki, "admin.forceHttps=true"));
    let reply = get_tls(&pki, warden.admin_addr(), "/commands/ruok", None).unwrap();
    assert_ruok(&reply);
    assert_eq!(
        reply.header("strict-transport-security"),
        Some("max-age=86400")
    );
    // A plain HTTP request gets no HTTP answer (at most a TLS alert), and a log line.
    let answer = http::plain_to_tls_port(warden.admin_addr(), "/commands/ruok");
    assert!(!answer.starts_with(b"HTTP/"), "{answer:?}");
    support::warden::wait_for("the refusal logged", Duration::from_secs(5), || {
        warden.log().contains("TLS handshake failed")
    });
}

#[test]
fn port_unification_serves_both_on_one_port() {
    let pki = pki();
    let warden = Warden::start(&https_lines(&pki, "admin.portUnification=true"));
    let secure = get_tls(&pki, warden.admin_addr(), "/commands/ruok", None).unwrap();
    assert_ruok(&secure);
    assert!(secure.header("strict-transport-security").is_some());
    let plain = http::get(warden.admin_addr(), "/commands/ruok", &[]).unwrap();
    assert_ruok(&plain);
    assert_eq!(plain.header("strict-transport-security"), None);
}

#[test]
fn need_client_auth_refuses_clients_without_a_certificate() {
    let pki = pki();
    let lines = https_lines(&pki, "admin.forceHttps=true\nadmin.needClientAuth=true");
    let warden = Warden::start(&lines);
    assert!(get_tls(&pki, warden.admin_addr(), "/commands/ruok", None).is_err());
    let reply = get_tls(
        &pki,
        warden.admin_addr(),
        "/commands/ruok",
        Some("operator"),
    )
    .unwrap();
    assert_ruok(&reply);
}

#[test]
fn https_without_the_quorum_key_store_is_a_start_error() {
    let dir = write_cfg("admin.forceHttps=true\n");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["server", "--check-config", "--zoo-cfg"])
        .arg(dir.path().join("zoo.cfg"))
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("ssl.quorum.keyStore.location"), "{text}");
}

/// A temporary directory (removed when dropped) holding a `zoo.cfg` of `lines`.
fn write_cfg(lines: &str) -> tempfile::TempDir {
    let dir = scratch_dir("admin-https-cfg");
    std::fs::write(
        dir.path().join("zoo.cfg"),
        format!(
            "dataDir={}\nclientPort=2181\n{lines}",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    dir
}
