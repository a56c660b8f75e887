//! TLS for client connections and between servers (docs/security.md): the secure client port, port unification
//! (TLS and plain on one port, told apart by the first byte), key and trust stores in PEM,
//! PKCS#12 and JKS, ZooKeeper's `ssl.clientAuth`, protocols and cipher suites mapped onto
//! rustls, the `x509` identity of a client certificate, and stores read again when their files
//! change.
//!
//! - `settings`: the `[tls]`, `[quorum_tls]` and `[metrics.tls]` config and their checks;
//! - `store`: reading key and trust stores;
//! - `verify`: client certificates as the JDK takes them (X.509 v1 included);
//! - `dn`: a certificate subject in ZooKeeper's x509 id form (RFC 2253);
//! - `quorum`: TLS between the servers of a cluster;
//! - here: the rustls server config built from all that (for the client ports, and the HTTPS
//!   of the admin server and of the metrics endpoint), its reloading, and the accepting of a
//!   client connection up to the point where `connection` takes it over.

pub mod dn;
pub mod quorum;
pub mod settings;
mod store;
mod verify;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::CertificateDer;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use settings::Protocols;
pub use settings::{ClientAuth, MetricsTls, QuorumTls, Store, Tls};
pub use store::StoreError;

use crate::config::InvalidConfig;

/// The first byte of a TLS record carrying a handshake (a ClientHello).
const TLS_HANDSHAKE_RECORD: u8 = 0x16;

/// One end of a client connection, plain or TLS, as `connection` reads and writes it.
pub type ClientRead = Box<dyn AsyncRead + Send + Unpin>;
pub type ClientWrite = Box<dyn AsyncWrite + Send + Unpin>;

/// An accepted client connection, ready for the ZooKeeper protocol.
pub struct ClientStream {
    pub read: ClientRead,
    pub write: ClientWrite,
    /// Set for a TLS connection: the client certificate's subject, if it showed one.
    pub tls: Option<Secured>,
}

/// What a TLS handshake established.
#[derive(Debug, Clone, Default)]
pub struct Secured {
    /// The client certificate's subject in RFC 2253 form (the `x509` id), if it showed one.
    pub subject: Option<String>,
}

impl ClientStream {
    pub fn plain(stream: TcpStream) -> ClientStream {
        let (read, write) = stream.into_split();
        ClientStream {
            read: Box::new(read),
            write: Box::new(write),
            tls: None,
        }
    }
}

/// Why TLS could not be set up; names the file or the setting.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("TLS key store: {0}")]
    KeyStore(StoreError),
    #[error("TLS trust store: {0}")]
    TrustStore(StoreError),
    #[error("TLS: {0}")]
    Config(#[from] InvalidConfig),
    #[error("TLS: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The protocol versions and cipher suites `asked` for, as rustls has them; a value rustls
/// lacks is an error that says what there is.
pub(crate) fn versions_and_suites(
    asked: &Protocols<'_>,
) -> Result<
    (
        Vec<&'static SupportedProtocolVersion>,
        Vec<SupportedCipherSuite>,
    ),
    InvalidConfig,
> {
    let (zoo, toml) = (asked.zoo_cfg_prefix, asked.toml_prefix);
    let allowed: &[&str] = match asked.protocol {
        "TLSv1.3" | "TLS" => &["TLSv1.3", "TLSv1.2"],
        "TLSv1.2" => &["TLSv1.2"],
        other => {
            return Err(InvalidConfig(format!(
                "{zoo}protocol ({toml}protocol) {other:?}: Warden's TLS (rustls) does TLSv1.3 \
                 and TLSv1.2 only"
            )));
        }
    };
    let mut versions = Vec::new();
    let wanted: Vec<&str> = if asked.enabled.is_empty() {
        allowed.to_vec()
    } else {
        asked.enabled.iter().map(String::as_str).collect()
    };
    for name in wanted {
        if !["TLSv1.3", "TLSv1.2"].contains(&name) {
            return Err(InvalidConfig(format!(
                "{zoo}enabledProtocols ({toml}enabled_protocols) names {name:?}: Warden's TLS \
                 (rustls) does TLSv1.3 and TLSv1.2 only"
            )));
        }
        if !allowed.contains(&name) {
            return Err(InvalidConfig(format!(
                "{zoo}enabledProtocols ({toml}enabled_protocols) names {name:?}, which \
                 {zoo}protocol={} does not allow: it allows {}",
                asked.protocol,
                allowed.join(", ")
            )));
        }
        versions.push(match name {
            "TLSv1.3" => &rustls::version::TLS13,
            _ => &rustls::version::TLS12,
        });
    }
    let all = rustls::crypto::ring::ALL_CIPHER_SUITES;
    let suites: Vec<SupportedCipherSuite> = if asked.cipher_suites.is_empty() {
        rustls::crypto::ring::DEFAULT_CIPHER_SUITES.to_vec()
    } else {
        let mut suites = Vec::new();
        for name in asked.cipher_suites {
            let suite = all.iter().find(|s| iana_name(s) == *name).ok_or_else(|| {
                InvalidConfig(format!(
                    "{zoo}ciphersuites ({toml}cipher_suites) names {name:?}, which Warden's TLS \
                     (rustls) does not have; it has {}",
                    all.iter().map(iana_name).collect::<Vec<_>>().join(", ")
                ))
            })?;
            suites.push(*suite);
        }
        suites
    };
    for version in &versions {
        if !suites.iter().any(|s| s.version() == *version) {
            return Err(InvalidConfig(format!(
                "{zoo}ciphersuites ({toml}cipher_suites) names no suite for {}, which is \
                 enabled: add one, or leave that protocol out of {zoo}enabledProtocols",
                version_name(version)
            )));
        }
    }
    Ok((versions, suites))
}

/// A suite's IANA name, which the JDK (and so ZooKeeper's `ssl.ciphersuites`) uses; rustls
/// writes TLS 1.3's with a `TLS13_` prefix.
fn iana_name(suite: &SupportedCipherSuite) -> String {
    let name = suite.suite().as_str().unwrap_or("unknown");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name.to_owned(),
    }
}

fn version_name(version: &SupportedProtocolVersion) -> &'static str {
    if version.version == rustls::ProtocolVersion::TLSv1_3 {
        "TLSv1.3"
    } else {
        "TLSv1.2"
    }
}

/// Serves this server's key and chain whatever the client asks for. Built directly from the
/// parts rather than through `with_single_cert`, whose key check runs the certificate through
/// webpki, which refuses X.509 v1 certificates such as kazoo's harness makes.
#[derive(Debug)]
struct OneCert(Arc<CertifiedKey>);

impl ResolvesServerCert for OneCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The crypto provider with the cipher suites `asked` for, and the versions to offer.
fn provider(
    asked: &Protocols<'_>,
) -> Result<(Arc<CryptoProvider>, Vec<&'static SupportedProtocolVersion>), TlsError> {
    let (versions, suites) = versions_and_suites(asked)?;
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites,
        ..rustls::crypto::ring::default_provider()
    });
    Ok((provider, versions))
}

/// The key and chain `key_store` holds, ready to be shown.
fn certified_key(
    provider: &CryptoProvider,
    key_store: &Store,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let material = store::load_key(key_store).map_err(TlsError::KeyStore)?;
    let signing_key = provider
        .key_provider
        .load_private_key(material.key)
        .map_err(|e| {
            TlsError::KeyStore(StoreError::Bad {
                path: key_store.location.display().to_string(),
                why: format!("the private key cannot sign: {e}"),
            })
        })?;
    Ok(Arc::new(CertifiedKey::new(material.chain, signing_key)))
}

/// The certificates `trust_store` holds, as trust anchors and as they were read.
fn trust_anchors(
    trust_store: &Store,
) -> Result<(Arc<RootCertStore>, Vec<CertificateDer<'static>>), TlsError> {
    let anchors = store::load_trust(trust_store).map_err(TlsError::TrustStore)?;
    let mut roots = RootCertStore::empty();
    for cert in &anchors {
        roots.add(cert.clone()).map_err(|e| {
            TlsError::TrustStore(StoreError::Bad {
                path: trust_store.location.display().to_string(),
                why: format!("a certificate cannot be a trust anchor: {e}"),
            })
        })?;
    }
    Ok((Arc::new(roots), anchors))
}

/// Checks the certificates of connecting clients or peers against `trust_store`; with
/// `optional`, one that shows none is let in.
fn client_verifier(
    provider: &Arc<CryptoProvider>,
    trust_store: &Store,
    optional: bool,
) -> Result<Arc<verify::ClientVerifier>, TlsError> {
    let (roots, anchors) = trust_anchors(trust_store)?;
    let mut webpki = WebPkiClientVerifier::builder_with_provider(roots, provider.clone());
    if optional {
        webpki = webpki.allow_unauthenticated();
    }
    let webpki = webpki.build().map_err(|e| {
        TlsError::TrustStore(StoreError::Bad {
            path: trust_store.location.display().to_string(),
            why: e.to_string(),
        })
    })?;
    Ok(Arc::new(verify::ClientVerifier::new(
        webpki,
        anchors,
        provider.signature_verification_algorithms,
    )))
}

/// A server context showing `key_store`'s key, with the protocols and suites `asked` for;
/// with `client_auth` want or need, client certificates are checked against `trust_store`
/// (none: none is asked for). Its files are read now. The client ports, the admin server and
/// the metrics endpoint all build theirs here.
fn server_config(
    key_store: &Store,
    trust_store: Option<&Store>,
    client_auth: ClientAuth,
    asked: &Protocols<'_>,
) -> Result<ServerConfig, TlsError> {
    let (provider, versions) = provider(asked)?;
    let certified = certified_key(&provider, key_store)?;
    let builder =
        ServerConfig::builder_with_provider(provider.clone()).with_protocol_versions(&versions)?;
    let builder = match (client_auth, trust_store) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(trust_store)) => builder.with_client_cert_verifier(client_verifier(
            &provider,
            trust_store,
            auth == ClientAuth::Want,
        )?),
    };
    Ok(builder.with_cert_resolver(Arc::new(OneCert(certified))))
}

/// [`server_config`] for an HTTP server: it says HTTP/1.1 by ALPN, as Jetty does, for
/// clients that ask.
pub(crate) fn https_server_config(
    key_store: &Store,
    trust_store: Option<&Store>,
    client_auth: ClientAuth,
    asked: &Protocols<'_>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let mut config = server_config(key_store, trust_store, client_auth, asked)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The HTTPS context of the Prometheus endpoint (`metricsProvider.ssl.*`); its settings were
/// checked by `MetricsTls::validate`, which the config's validation runs.
fn metrics_https_config(tls: &MetricsTls) -> Result<Arc<ServerConfig>, TlsError> {
    let key_store = tls.key_store.as_ref().ok_or_else(|| {
        InvalidConfig(
            "HTTPS for metrics needs a key store (metricsProvider.ssl.keyStore.location; \
             TOML metrics.tls.key_store)"
                .into(),
        )
    })?;
    https_server_config(
        key_store,
        tls.trust_store.as_ref(),
        tls.client_auth,
        &tls.protocols(),
    )
}

/// The rustls server config `tls` describes, its files read now.
fn build(tls: &Tls) -> Result<Arc<ServerConfig>, TlsError> {
    let key_store = tls
        .key_store
        .as_ref()
        .ok_or_else(|| InvalidConfig("TLS needs a key store (ssl.keyStore.location)".into()))?;
    Ok(Arc::new(server_config(
        key_store,
        tls.trust_store.as_ref(),
        tls.client_auth,
        &tls.protocols(),
    )?))
}

/// When a store file was last changed, and its size: what tells a changed file.
type Stamp = Option<(SystemTime, u64)>;

/// A TLS context built from store files, and built again from them when they change.
struct Reloading<C> {
    stores: Vec<PathBuf>,
    current: Mutex<Arc<C>>,
}

impl<C> Reloading<C> {
    fn new<'a>(stores: impl Iterator<Item = &'a Store>, built: Arc<C>) -> Reloading<C> {
        Reloading {
            stores: stores.map(|s| s.location.clone()).collect(),
            current: Mutex::new(built),
        }
    }

    fn get(&self) -> Arc<C> {
        self.current
            .lock()
            .expect("tls config lock poisoned")
            .clone()
    }

    fn stamps(&self) -> Vec<Stamp> {
        self.stores
            .iter()
            .map(|path| {
                std::fs::metadata(path)
                    .ok()
                    .and_then(|m| Some((m.modified().ok()?, m.len())))
            })
            .collect()
    }

    /// Looks at the store files every second and, when one changed, builds the context
    /// again: connections made after get the new key and trust; files that do not load leave
    /// the old ones in place, with a log line. Runs until the server stops.
    async fn follow(&self, what: &str, build: impl Fn() -> Result<Arc<C>, TlsError>) {
        let interval = Duration::from_millis(settings::RELOAD_CHECK_INTERVAL_MS_DEFAULT.into());
        let mut seen = self.stamps();
        loop {
            tokio::time::sleep(interval).await;
            let now = self.stamps();
            if now == seen {
                continue;
            }
            seen = now;
            match build() {
                Ok(built) => {
                    *self.current.lock().expect("tls config lock poisoned") = built;
                    tracing::info!("{what}: key and trust stores changed: read again");
                }
                Err(e) => tracing::warn!(
                    "{what}: key or trust store changed but cannot be used, keeping the \
                     previous ones: {e}"
                ),
            }
        }
    }
}

/// An HTTPS endpoint's rustls config as the admin server and the metrics endpoint take it, a
/// connection at a time: the admin server's stays as built, the metrics endpoint's follows its
/// store files.
#[derive(Clone)]
pub struct HttpsContext(Arc<Reloading<ServerConfig>>);

impl HttpsContext {
    /// A context that stays as built (the admin server's, from the quorum key material).
    pub fn fixed(config: Arc<ServerConfig>) -> HttpsContext {
        HttpsContext(Arc::new(Reloading::new(
            std::iter::empty::<&Store>(),
            config,
        )))
    }

    /// The metrics endpoint's context (`metricsProvider.ssl.*`), its files read now; any
    /// failure stops the start.
    pub fn metrics(tls: &MetricsTls) -> Result<HttpsContext, TlsError> {
        let stores = tls.key_store.iter().chain(&tls.trust_store);
        Ok(HttpsContext(Arc::new(Reloading::new(
            stores,
            metrics_https_config(tls)?,
        ))))
    }

    pub fn current(&self) -> Arc<ServerConfig> {
        self.0.get()
    }

    /// Reads the metrics endpoint's store files again whenever they change (see
    /// `Reloading::follow`), as ZooKeeper 3.10 does, whose Jetty scans its key store every ten
    /// minutes. Always on, as there: no key turns it off. Runs until the server stops.
    pub async fn follow_metrics(self, tls: MetricsTls) {
        self.0
            .follow("HTTPS for metrics", || metrics_https_config(&tls))
            .await;
    }
}

/// The server's TLS: the current rustls config, replaced when the store files change.
pub struct Acceptor {
    tls: Tls,
    current: Reloading<ServerConfig>,
}

impl Acceptor {
    /// Reads the stores and builds the config; any failure stops the start.
    pub fn new(tls: &Tls) -> Result<Acceptor, TlsError> {
        Ok(Acceptor {
            tls: tls.clone(),
            current: Reloading::new(tls.key_store.iter().chain(&tls.trust_store), build(tls)?),
        })
    }

    /// With `reload_cert_files`, reads the store files again whenever they change (see
    /// `Reloading::follow`). Runs until the server stops.
    pub async fn reload_on_change(self: Arc<Self>) {
        if self.tls.reload_cert_files {
            self.current
                .follow("TLS for clients", || build(&self.tls))
                .await;
        }
    }

    /// The TLS handshake on an accepted connection, within the handshake timeout.
    async fn handshake(&self, stream: TcpStream, peer: SocketAddr) -> Option<ClientStream> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.current.get());
        let limit = Duration::from_millis(self.tls.handshake_timeout_ms.into());
        let stream = match tokio::time::timeout(limit, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                // A port probe or a health check: connected, said nothing, left.
                tracing::debug!(%peer, "connection closed before the TLS handshake ended: {e}");
                return None;
            }
            Ok(Err(e)) => {
                tracing::warn!(%peer, "closing connection: TLS handshake failed: {e}");
                return None;
            }
            Err(_) => {
                tracing::warn!(
                    %peer,
                    "closing connection: TLS handshake not done within {} ms",
                    limit.as_millis()
                );
                return None;
            }
        };
        let subject = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| {
                x509_parser::parse_x509_certificate(leaf.as_ref())
                    .ok()
                    .map(|(_, cert)| dn::rfc2253(cert.subject()))
            });
        let (read, write) = tokio::io::split(stream);
        Some(ClientStream {
            read: Box::new(read),
            write: Box::new(write),
            tls: Some(Secured { subject }),
        })
    }

    /// A connection on the secure port: TLS or nothing.
    pub async fn secure(&self, stream: TcpStream, peer: SocketAddr) -> Option<ClientStream> {
        self.handshake(stream, peer).await
    }

    /// A connection on a unified port: TLS if its first byte starts a TLS handshake, plain
    /// otherwise (ZooKeeper's `client.portUnification`).
    pub async fn unified(&self, stream: TcpStream, peer: SocketAddr) -> Option<ClientStream> {
        let limit = Duration::from_millis(self.tls.handshake_timeout_ms.into());
        match opens_with_tls(&stream, limit).await {
            Ok(true) => self.handshake(stream, peer).await,
            Ok(false) => Some(ClientStream::plain(stream)),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                tracing::warn!(%peer, "closing connection: {e}");
                None
            }
            Err(e) => {
                tracing::debug!(%peer, "connection closed before its first byte: {e}");
                None
            }
        }
    }
}

/// Whether a connection on a port that takes TLS and plain both opens with a TLS handshake,
/// told by its first byte, waited for at most `limit`.
pub(crate) async fn opens_with_tls(stream: &TcpStream, limit: Duration) -> std::io::Result<bool> {
    let mut first = [0u8; 1];
    match tokio::time::timeout(limit, stream.peek(&mut first)).await {
        Ok(Ok(1)) => Ok(first[0] == TLS_HANDSHAKE_RECORD),
        Ok(Ok(_)) => Err(std::io::ErrorKind::UnexpectedEof.into()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "no first byte within {} ms to tell TLS from plain",
                limit.as_millis()
            ),
        )),
    }
}

/// Whether `prefix`, the first bytes of a plain connection, is a TLS handshake record (a TLS
/// client on a plain port).
pub fn looks_like_tls(prefix: &[u8]) -> bool {
    prefix.len() >= 2 && prefix[0] == TLS_HANDSHAKE_RECORD && prefix[1] == 0x03
}
