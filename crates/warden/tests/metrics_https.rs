//! `GET /metrics` over HTTPS, as ZooKeeper 3.10's PrometheusMetricsProvider serves it
//! (`metricsProvider.httpsPort` and `metricsProvider.ssl.*`, docs/metrics.md), on real
//! `warden server` processes started from a zoo.cfg, with certificates made by openssl and
//! keytool and a rustls scraper.

mod support;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::http::{self, Reply};
use support::pki::{PASSWORD, Pki};
use support::servers::{free_port, scratch_dir};
use support::warden::{Warden, output_within, wait_for};

const PROMETHEUS: &str = "metricsProvider.className=org.apache.zookeeper.metrics.prometheus.PrometheusMetricsProvider\n\
     metricsProvider.httpHost=127.0.0.1";

/// A CA for the server and its scrapers, and a second one nobody trusts.
fn pki(name: &str) -> Pki {
    let pki = Pki::scratch(name);
    pki.ca("ca", "Metrics CA");
    pki.ca("rogue", "Rogue CA");
    std::fs::write(pki.path("server.ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
    std::fs::write(pki.path("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    pki.leaf("server", "ca", "/CN=metrics", Some("server.ext"), "30");
    pki.leaf("scraper", "ca", "/CN=prometheus", Some("client.ext"), "30");
    pki.leaf(
        "intruder",
        "rogue",
        "/CN=prometheus",
        Some("client.ext"),
        "30",
    );
    pki
}

/// A scraper that trusts the CA, shows the certificate `identity` if any, and offers only
/// `versions`.
fn scraper(
    pki: &Pki,
    identity: Option<&str>,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> std::sync::Arc<rustls::ClientConfig> {
    let identity = identity.map(|name| {
        (
            pki.path(&format!("{name}.pem")),
            pki.path(&format!("{name}.key")),
        )
    });
    http::tls_client(&pki.path("ca.pem"), identity, versions)
}

fn scrape_tls(pki: &Pki, port: u16, identity: Option<&str>) -> std::io::Result<Reply> {
    let client = scraper(pki, identity, rustls::ALL_VERSIONS);
    http::get_tls(client, local(port), "/metrics")
}

fn local(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// A scrape as Prometheus takes it: 200, the text format, ZooKeeper's families.
fn assert_metrics(reply: &Reply) {
    assert_eq!(reply.status, 200, "{reply:?}");
    assert_eq!(
        reply.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert!(
        reply.body.contains("\n# TYPE znode_count gauge\n"),
        "{reply:?}"
    );
    assert!(reply.body.contains("\nznode_count "), "{reply:?}");
}

#[test]
fn https_beside_plain_http_needs_a_scraper_certificate_by_default() {
    let pki = pki("metrics-https-need");
    let (http_port, https_port) = (free_port(), free_port());
    let warden = Warden::start(&format!(
        "{PROMETHEUS}\nmetricsProvider.httpPort={http_port}\n\
         metricsProvider.httpsPort={https_port}\n\
         metricsProvider.ssl.keyStore.location={}\n\
         metricsProvider.ssl.trustStore.location={}\n",
        pki.path("server-bundle.pem").display(),
        pki.path("ca.pem").display()
    ));

    let secure = scrape_tls(&pki, https_port, Some("scraper")).unwrap();
    assert_metrics(&secure);
    assert_eq!(
        secure.header("strict-transport-security"),
        Some("max-age=86400")
    );
    // ZooKeeper's default is ssl.need.client.auth=true: no certificate, no scrape; nor with
    // one from a CA the trust store does not hold.
    assert!(scrape_tls(&pki, https_port, None).is_err());
    assert!(scrape_tls(&pki, https_port, Some("intruder")).is_err());
    // Plain HTTP on the HTTPS port gets no HTTP answer.
    let answer = http::plain_to_tls_port(local(https_port), "/metrics");
    assert!(!answer.starts_with(b"HTTP/"), "{answer:?}");
    wait_for("the refusals logged", Duration::from_secs(5), || {
        warden
            .log()
            .matches("closing a metrics connection: TLS handshake failed")
            .count()
            >= 3
    });
    // The plain port serves beside it, without HSTS.
    let plain = http::get(local(http_port), "/metrics", &[]).unwrap();
    assert_metrics(&plain);
    assert_eq!(plain.header("strict-transport-security"), None);
}

#[test]
fn equal_ports_serve_both_on_one_port_from_a_pkcs12_store_without_client_certificates() {
    let pki = pki("metrics-https-unified");
    let store = pki.pkcs12("server");
    let port = free_port();
    let _warden = Warden::start(&format!(
        "{PROMETHEUS}\nmetricsProvider.httpPort={port}\nmetricsProvider.httpsPort={port}\n\
         metricsProvider.ssl.keyStore.location={}\n\
         metricsProvider.ssl.keyStore.password={PASSWORD}\n\
         metricsProvider.ssl.keyStore.type=PKCS12\n\
         metricsProvider.ssl.need.client.auth=false\n",
        store.display()
    ));
    // No trust store and need.client.auth=false: no certificate asked for.
    let secure = scrape_tls(&pki, port, None).unwrap();
    assert_metrics(&secure);
    assert!(secure.header("strict-transport-security").is_some());
    let plain = http::get(local(port), "/metrics", &[]).unwrap();
    assert_metrics(&plain);
    assert_eq!(plain.header("strict-transport-security"), None);
}

#[test]
fn jks_stores_want_client_auth_and_the_protocols_and_suites_named() {
    let pki = pki("metrics-https-jks");
    let key_store = pki.jks_key("server");
    let trust_store = pki.trust("ca", "JKS", "jks");
    let https_port = free_port();
    let _warden = Warden::start(&format!(
        "{PROMETHEUS}\nmetricsProvider.httpsPort={https_port}\n\
         metricsProvider.ssl.keyStore.location={}\n\
         metricsProvider.ssl.keyStore.password={PASSWORD}\n\
         metricsProvider.ssl.trustStore.location={}\n\
         metricsProvider.ssl.trustStore.password={PASSWORD}\n\
         metricsProvider.ssl.need.client.auth=false\n\
         metricsProvider.ssl.enabledProtocols=TLSv1.2\n\
         metricsProvider.ssl.ciphersuites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384\n",
        key_store.display(),
        trust_store.display()
    ));
    let tls12 = &[&rustls::version::TLS12];
    // want (ZooKeeper's default once need is off): served without a certificate, and with
    // a good one; refused with a bad one.
    let anonymous = http::get_tls(scraper(&pki, None, tls12), local(https_port), "/metrics");
    assert_metrics(&anonymous.unwrap());
    let known = scraper(&pki, Some("scraper"), tls12);
    assert_metrics(&http::get_tls(known, local(https_port), "/metrics").unwrap());
    let rogue = scraper(&pki, Some("intruder"), tls12);
    assert!(http::get_tls(rogue, local(https_port), "/metrics").is_err());
    // enabledProtocols=TLSv1.2: a scraper that speaks TLS 1.3 only is refused.
    let tls13 = scraper(&pki, None, &[&rustls::version::TLS13]);
    assert!(http::get_tls(tls13, local(https_port), "/metrics").is_err());
    // httpsPort alone: no plain endpoint on ZooKeeper's default 7000 or anywhere else, so
    // nothing else was started; the HTTPS one answered above.
}

/// ZooKeeper 3.10 reads the metrics endpoint's stores again when they change (its Jetty scans
/// them); so does Warden, and a file that does not load keeps the ones in use.
#[test]
fn changed_store_files_are_read_again() {
    let pki = pki("metrics-https-reload");
    let key_store = pki.path("live-key.pem");
    let trust_store = pki.path("live-trust.pem");
    std::fs::copy(pki.path("server-bundle.pem"), &key_store).unwrap();
    std::fs::copy(pki.path("ca.pem"), &trust_store).unwrap();
    let https_port = free_port();
    let warden = Warden::start(&format!(
        "{PROMETHEUS}\nmetricsProvider.httpsPort={https_port}\n\
         metricsProvider.ssl.keyStore.location={}\n\
         metricsProvider.ssl.trustStore.location={}\n",
        key_store.display(),
        trust_store.display()
    ));
    assert_metrics(&scrape_tls(&pki, https_port, Some("scraper")).unwrap());
    assert!(scrape_tls(&pki, https_port, Some("intruder")).is_err());

    // The trust store now holds the other CA only.
    std::fs::copy(pki.path("rogue.pem"), &trust_store).unwrap();
    wait_for(
        "the trust store read again",
        Duration::from_secs(10),
        || scrape_tls(&pki, https_port, Some("intruder")).is_ok(),
    );
    assert!(scrape_tls(&pki, https_port, Some("scraper")).is_err());
    assert!(
        warden
            .log()
            .contains("HTTPS for metrics: key and trust stores changed")
    );

    // A broken file keeps the stores in use, with a log line.
    std::fs::write(&trust_store, "not a certificate").unwrap();
    wait_for("the reload failure logged", Duration::from_secs(10), || {
        warden.log().contains("keeping the previous ones")
    });
    assert_metrics(&scrape_tls(&pki, https_port, Some("intruder")).unwrap());
}

/// `warden server` with `args` on a zoo.cfg of `lines`: whether it succeeded, its stdout and
/// its stderr; a failure if it is still running after 30 s (then it is killed by its PID).
fn run_server(args: &[&str], lines: &str) -> (bool, String, String) {
    let scratch = scratch_dir("metrics-https-cfg");
    let dir = scratch.path();
    let cfg = dir.join("zoo.cfg");
    std::fs::write(
        &cfg,
        format!(
            "dataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n\
             {PROMETHEUS}\n{lines}",
            dir.join("data").display(),
            free_port()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_warden"))
        .arg("server")
        .args(args)
        .arg("--zoo-cfg")
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = output_within(
        child,
        Duration::from_secs(30),
        &format!("warden server {args:?}"),
    );
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn https_without_a_usable_key_store_stops_the_start() {
    let pki = pki("metrics-https-errors");
    let port = free_port();
    // No key store: a real start fails, saying what is missing.
    let (ok, _, text) = run_server(&[], &format!("metricsProvider.httpsPort={port}\n"));
    assert!(!ok, "{text}");
    assert!(
        text.contains("metricsProvider.ssl.keyStore.location"),
        "{text}"
    );
    // A key store that is not there: the file is named.
    let missing: PathBuf = pki.path("missing.pem");
    let (ok, _, text) = run_server(
        &[],
        &format!(
            "metricsProvider.httpsPort={port}\nmetricsProvider.ssl.need.client.auth=false\n\
             metricsProvider.ssl.keyStore.location={}\n",
            missing.display()
        ),
    );
    assert!(!ok, "{text}");
    assert!(text.contains("HTTPS for Prometheus metrics"), "{text}");
    assert!(text.contains(&missing.display().to_string()), "{text}");
    // ZooKeeper's default need.client.auth=true without a trust store.
    let (ok, _, text) = run_server(
        &["--check-config"],
        &format!(
            "metricsProvider.httpsPort={port}\nmetricsProvider.ssl.keyStore.location={}\n",
            pki.path("server-bundle.pem").display()
        ),
    );
    assert!(!ok, "{text}");
    assert!(text.contains("needs a trust store"), "{text}");
    // A suite rustls does not have.
    let (ok, _, text) = run_server(
        &["--check-config"],
        &format!(
            "metricsProvider.httpsPort={port}\nmetricsProvider.ssl.need.client.auth=false\n\
             metricsProvider.ssl.keyStore.location={}\n\
             metricsProvider.ssl.ciphersuites=TLS_RSA_WITH_RC4_128_MD5\n",
            pki.path("server-bundle.pem").display()
        ),
    );
    assert!(!ok, "{text}");
    assert!(text.contains("metricsProvider.ssl.ciphersuites"), "{text}");
}

#[test]
fn print_config_shows_the_https_endpoint_as_toml_that_loads_back() {
    let pki = pki("metrics-https-print");
    let (ok, text, log) = run_server(
        &["--print-config"],
        &format!(
            "metricsProvider.httpPort=7000\nmetricsProvider.httpsPort=7443\n\
             metricsProvider.ssl.keyStore.location={}\n\
             metricsProvider.ssl.trustStore.location={}\n\
             metricsProvider.ssl.enabledProtocols=TLSv1.3\n",
            pki.path("server-bundle.pem").display(),
            pki.path("ca.pem").display()
        ),
    );
    assert!(ok, "{log}");
    assert!(text.contains("https_listen = \"127.0.0.1:7443\""), "{text}");
    assert!(text.contains("[metrics.tls]"), "{text}");
    assert!(text.contains("client_auth = \"need\""), "{text}");
    assert!(text.contains("enabled_protocols = [\"TLSv1.3\"]"), "{text}");
    let scratch = scratch_dir("metrics-https-toml");
    let toml_path = scratch.path().join("warden.toml");
    std::fs::write(&toml_path, &text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_warden"))
        .args(["server", "--check-config", "--config"])
        .arg(&toml_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("[metrics.tls]"));
}
