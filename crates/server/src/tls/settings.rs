//! The TLS settings of the client ports, as Warden's TOML `[tls]` table holds them, and of the
//! quorum port, as its `[quorum_tls]` table holds them; zoo.cfg's `secureClientPort`, `ssl.*`,
//! `client.*`, `sslQuorum`, `portUnification` and `ssl.quorum.*` keys are read into the same
//! structs (`crate::zoo_cfg`). docs/security.md says what each does.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{HostPort, InvalidConfig};

/// How long a TLS handshake may take, and how long the plain port waits for a client's first
/// byte to tell TLS from plain (ZooKeeper's `ssl.handshakeDetectionTimeoutMillis`).
pub const HANDSHAKE_TIMEOUT_MS_DEFAULT: u32 = 5000;
/// How often the key and trust store files are looked at when `reload_cert_files` is on.
pub const RELOAD_CHECK_INTERVAL_MS_DEFAULT: u32 = 1000;

/// TLS for clients (docs/security.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tls {
    /// Where TLS clients connect (zoo.cfg: `secureClientPortAddress`:`secureClientPort`);
    /// none: no secure port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secure_client_listen: Option<HostPort>,
    /// Whether the plain client port takes TLS clients too, told apart by their first byte
    /// (zoo.cfg: `client.portUnification`).
    pub port_unification: bool,
    /// Whether `client_listen` takes TLS clients only: a zoo.cfg with `secureClientPort` and
    /// no `clientPort`, whose one client port is the secure one.
    pub client_listen_tls_only: bool,
    /// This server's key and certificate chain (`ssl.keyStore.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_store: Option<Store>,
    /// The certificates client certificates must chain to (`ssl.trustStore.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_store: Option<Store>,
    /// Whether clients must present a certificate (`ssl.clientAuth`; ZooKeeper's default
    /// `need`).
    pub client_auth: ClientAuth,
    /// The protocol the context is made for (`ssl.protocol`): `TLSv1.3` (or `TLS`) allows
    /// TLS 1.3 and 1.2, `TLSv1.2` only 1.2, as the JDK's contexts of those names.
    pub protocol: String,
    /// The protocol versions offered, a subset of what `protocol` allows
    /// (`ssl.enabledProtocols`); empty: all of them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub enabled_protocols: Vec<String>,
    /// Cipher suites by their IANA (= JDK) names (`ssl.ciphersuites`); empty: rustls's
    /// defaults.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cipher_suites: Vec<String>,
    /// Whether changed key and trust store files are read again without a restart
    /// (`client.certReload`); new connections get the new files.
    pub reload_cert_files: bool,
    /// Bound on a TLS handshake, and on the plain port's wait for a first byte
    /// (`ssl.handshakeDetectionTimeoutMillis`).
    pub handshake_timeout_ms: u32,
    /// The certificate subject (RFC 2253, as the x509 ACL scheme writes it) whose holder passes
    /// every ACL check (`X509AuthenticationProvider.superUser`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub super_user: Option<String>,
}

impl Default for Tls {
    fn default() -> Self {
        Tls {
            secure_client_listen: None,
            port_unification: false,
            client_listen_tls_only: false,
            key_store: None,
            trust_store: None,
            client_auth: ClientAuth::Need,
            protocol: "TLSv1.3".to_owned(),
            enabled_protocols: Vec::new(),
            cipher_suites: Vec::new(),
            reload_cert_files: false,
            handshake_timeout_ms: HANDSHAKE_TIMEOUT_MS_DEFAULT,
            super_user: None,
        }
    }
}

impl Tls {
    /// Whether any client connection may be TLS.
    pub fn enabled(&self) -> bool {
        self.secure_client_listen.is_some() || self.port_unification || self.client_listen_tls_only
    }

    /// Whether clients may authenticate with certificates, so that `x509` ids are valid in
    /// ACLs.
    pub fn x509_available(&self) -> bool {
        self.enabled() && self.client_auth != ClientAuth::None
    }

    pub(crate) fn validate(&self) -> Result<(), InvalidConfig> {
        if !self.enabled() {
            return Ok(());
        }
        if self.client_listen_tls_only
            && (self.port_unification || self.secure_client_listen.is_some())
        {
            return Err(InvalidConfig(
                "tls.client_listen_tls_only makes client_listen the TLS port: it goes with \
                 neither tls.port_unification nor tls.secure_client_listen"
                    .into(),
            ));
        }
        if self.key_store.is_none() {
            return Err(InvalidConfig(
                "TLS for clients (tls.secure_client_listen or tls.port_unification; zoo.cfg \
                 secureClientPort or client.portUnification) needs a key store \
                 (tls.key_store; zoo.cfg ssl.keyStore.location)"
                    .into(),
            ));
        }
        if self.client_auth != ClientAuth::None && self.trust_store.is_none() {
            return Err(InvalidConfig(format!(
                "tls.client_auth = {} (zoo.cfg ssl.clientAuth; ZooKeeper's default is need) \
                 needs a trust store (tls.trust_store; zoo.cfg ssl.trustStore.location): \
                 Warden has no JDK default trust store to fall back on; or set it to none",
                self.client_auth
            )));
        }
        if self.handshake_timeout_ms == 0 {
            return Err(InvalidConfig(
                "tls.handshake_timeout_ms must be at least 1".into(),
            ));
        }
        for store in self.key_store.iter().chain(&self.trust_store) {
            store.store_type()?;
        }
        // The protocols and suites are checked against rustls here, so that --check-config
        // catches them.
        crate::tls::versions_and_suites(&self.protocols()).map(|_| ())
    }

    pub(crate) fn protocols(&self) -> Protocols<'_> {
        Protocols {
            protocol: &self.protocol,
            enabled: &self.enabled_protocols,
            cipher_suites: &self.cipher_suites,
            zoo_cfg_prefix: "ssl.",
            toml_prefix: "tls.",
        }
    }
}

/// TLS between the servers of a cluster (ZooKeeper's quorum TLS, docs/security.md). Its key
/// material is also the admin HTTP server's when that serves HTTPS, as ZooKeeper's is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QuorumTls {
    /// Whether this server dials its peers over TLS, and takes only TLS peers unless
    /// `port_unification` (zoo.cfg: `sslQuorum`).
    pub enabled: bool,
    /// Whether the quorum port takes TLS and plain peers both, told apart by their first byte:
    /// the middle step of a rolling switch to or from TLS (zoo.cfg: `portUnification`).
    pub port_unification: bool,
    /// This server's key and certificate, shown to the peers it dials and to those that dial
    /// it (`ssl.quorum.keyStore.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_store: Option<Store>,
    /// The certificates a peer's certificate must chain to (`ssl.quorum.trustStore.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_store: Option<Store>,
    /// As `tls.protocol` (`ssl.quorum.protocol`).
    pub protocol: String,
    /// As `tls.enabled_protocols` (`ssl.quorum.enabledProtocols`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub enabled_protocols: Vec<String>,
    /// As `tls.cipher_suites` (`ssl.quorum.ciphersuites`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cipher_suites: Vec<String>,
    /// Whether a server checks that the certificate of the peer it dials names the host it
    /// dialed, by DNS name or IP address (`ssl.quorum.hostnameVerification`, true as in
    /// ZooKeeper).
    pub hostname_verification: bool,
    /// Whether changed store files are read again without a restart
    /// (`sslQuorumReloadCertFiles`); connections made after get the new files.
    pub reload_cert_files: bool,
    /// Bound on a peer's TLS handshake, and on the unified port's wait for a first byte
    /// (`ssl.quorum.handshakeDetectionTimeoutMillis`).
    pub handshake_timeout_ms: u32,
}

impl Default for QuorumTls {
    fn default() -> Self {
        QuorumTls {
            enabled: false,
            port_unification: false,
            key_store: None,
            trust_store: None,
            protocol: "TLSv1.3".to_owned(),
            enabled_protocols: Vec::new(),
            cipher_suites: Vec::new(),
            hostname_verification: true,
            reload_cert_files: false,
            handshake_timeout_ms: HANDSHAKE_TIMEOUT_MS_DEFAULT,
        }
    }
}

impl QuorumTls {
    /// Whether a peer connection may be TLS, so that the key material is needed.
    pub fn in_use(&self) -> bool {
        self.enabled || self.port_unification
    }

    pub(crate) fn validate(&self) -> Result<(), InvalidConfig> {
        if !self.in_use() {
            return Ok(());
        }
        if self.key_store.is_none() || self.trust_store.is_none() {
            return Err(InvalidConfig(
                "TLS between servers (quorum_tls.enabled or quorum_tls.port_unification; \
                 zoo.cfg sslQuorum or portUnification) needs a key store and a trust store \
                 (quorum_tls.key_store and quorum_tls.trust_store; zoo.cfg \
                 ssl.quorum.keyStore.location and ssl.quorum.trustStore.location): every \
                 server shows its certificate to the other and checks the other's"
                    .into(),
            ));
        }
        if self.handshake_timeout_ms == 0 {
            return Err(InvalidConfig(
                "quorum_tls.handshake_timeout_ms must be at least 1".into(),
            ));
        }
        for store in self.key_store.iter().chain(&self.trust_store) {
            store.store_type()?;
        }
        crate::tls::versions_and_suites(&self.protocols()).map(|_| ())
    }

    pub(crate) fn protocols(&self) -> Protocols<'_> {
        Protocols {
            protocol: &self.protocol,
            enabled: &self.enabled_protocols,
            cipher_suites: &self.cipher_suites,
            zoo_cfg_prefix: "ssl.quorum.",
            toml_prefix: "quorum_tls.",
        }
    }
}

/// TLS for the Prometheus endpoint's HTTPS port, as ZooKeeper 3.10's
/// PrometheusMetricsProvider reads its `metricsProvider.ssl.*` keys (docs/metrics.md). Read
/// only when `metrics.https_listen` is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsTls {
    /// The endpoint's key and certificate chain (`metricsProvider.ssl.keyStore.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_store: Option<Store>,
    /// The certificates a scraper's certificate must chain to
    /// (`metricsProvider.ssl.trustStore.*`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_store: Option<Store>,
    /// Whether a scraper must show a certificate (`metricsProvider.ssl.need.client.auth` and
    /// `.want.client.auth`, both true by default in ZooKeeper: need).
    pub client_auth: ClientAuth,
    /// As `tls.enabled_protocols` (`metricsProvider.ssl.enabledProtocols`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub enabled_protocols: Vec<String>,
    /// As `tls.cipher_suites` (`metricsProvider.ssl.ciphersuites`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cipher_suites: Vec<String>,
}

impl Default for MetricsTls {
    fn default() -> Self {
        MetricsTls {
            key_store: None,
            trust_store: None,
            client_auth: ClientAuth::Need,
            enabled_protocols: Vec::new(),
            cipher_suites: Vec::new(),
        }
    }
}

impl MetricsTls {
    pub fn is_default(&self) -> bool {
        *self == MetricsTls::default()
    }

    /// Checks what HTTPS for metrics needs.
    pub(crate) fn validate(&self) -> Result<(), InvalidConfig> {
        if self.key_store.is_none() {
            return Err(InvalidConfig(
                "HTTPS for metrics (metrics.https_listen; zoo.cfg metricsProvider.httpsPort) \
                 needs a key store (metrics.tls.key_store; zoo.cfg \
                 metricsProvider.ssl.keyStore.location)"
                    .into(),
            ));
        }
        if self.client_auth != ClientAuth::None && self.trust_store.is_none() {
            return Err(InvalidConfig(format!(
                "metrics.tls.client_auth = {} (zoo.cfg metricsProvider.ssl.need.client.auth, \
                 true by default as in ZooKeeper) needs a trust store to check scrapers' \
                 certificates against (metrics.tls.trust_store; zoo.cfg \
                 metricsProvider.ssl.trustStore.location); or set it to none \
                 (metricsProvider.ssl.need.client.auth=false)",
                self.client_auth
            )));
        }
        for store in self.key_store.iter().chain(&self.trust_store) {
            store.store_type()?;
        }
        crate::tls::versions_and_suites(&self.protocols()).map(|_| ())
    }

    pub(crate) fn protocols(&self) -> Protocols<'_> {
        Protocols {
            // ZooKeeper's provider has no protocol key: Jetty's context is "TLS", which
            // allows every version the JDK has.
            protocol: "TLS",
            enabled: &self.enabled_protocols,
            cipher_suites: &self.cipher_suites,
            zoo_cfg_prefix: "metricsProvider.ssl.",
            toml_prefix: "metrics.tls.",
        }
    }
}

/// The protocol versions and cipher suites a TLS context is asked for, with the names of the
/// settings that ask, for error messages.
pub(crate) struct Protocols<'a> {
    pub protocol: &'a str,
    pub enabled: &'a [String],
    pub cipher_suites: &'a [String],
    pub zoo_cfg_prefix: &'static str,
    pub toml_prefix: &'static str,
}

/// A key or trust store file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Store {
    /// The file (`ssl.keyStore.location`).
    pub location: PathBuf,
    /// What decrypts it: PKCS#12 and JKS stores, encrypted PEM keys (`ssl.keyStore.password`,
    /// or the first line of `ssl.keyStore.passwordPath`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    /// `PEM`, `PKCS12` or `JKS` (`ssl.keyStore.type`); none: from the file's extension
    /// (`.pem`, `.p12`/`.pfx`, `.jks`), as ZooKeeper.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// The formats a store may be in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreType {
    Pem,
    Pkcs12,
    Jks,
}

impl Store {
    pub fn new(location: impl Into<PathBuf>) -> Store {
        Store {
            location: location.into(),
            password: None,
            kind: None,
        }
    }

    /// The store's format: its `type`, or ZooKeeper's guess from the extension
    /// (`KeyStoreFileType.fromFilename`).
    pub fn store_type(&self) -> Result<StoreType, InvalidConfig> {
        match &self.kind {
            Some(kind) => parse_store_type(kind).ok_or_else(|| {
                InvalidConfig(format!(
                    "store type {kind:?} of {}: Warden reads PEM, PKCS12 and JKS{}",
                    self.location.display(),
                    if kind.eq_ignore_ascii_case("BCFKS") {
                        " (BCFKS is Bouncy Castle's own format: convert it with keytool \
                         -importkeystore -deststoretype PKCS12)"
                    } else {
                        ""
                    }
                ))
            }),
            None => type_from_extension(&self.location).ok_or_else(|| {
                InvalidConfig(format!(
                    "cannot tell the format of {} from its extension (.pem, .p12, .pfx, .jks): \
                     name it (ssl.keyStore.type / ssl.trustStore.type, or type in the TOML)",
                    self.location.display()
                ))
            }),
        }
    }
}

fn parse_store_type(kind: &str) -> Option<StoreType> {
    match kind.to_ascii_uppercase().as_str() {
        "PEM" => Some(StoreType::Pem),
        "PKCS12" => Some(StoreType::Pkcs12),
        "JKS" => Some(StoreType::Jks),
        _ => None,
    }
}

fn type_from_extension(path: &Path) -> Option<StoreType> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    match ext.as_str() {
        "pem" | "crt" => Some(StoreType::Pem),
        "p12" | "pfx" => Some(StoreType::Pkcs12),
        "jks" => Some(StoreType::Jks),
        _ => None,
    }
}

/// Whether a client must show a certificate (ZooKeeper's `ssl.clientAuth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientAuth {
    /// No certificate is asked for.
    None,
    /// One is asked for; a client without one is served, one with a bad one is refused.
    Want,
    /// A client without a valid certificate is refused at the handshake.
    Need,
}

impl ClientAuth {
    /// ZooKeeper's values, case-insensitive (`X509Util.ClientAuth.fromPropertyValue`).
    pub fn parse(value: &str) -> Option<ClientAuth> {
        match value.to_ascii_lowercase().as_str() {
            "none" => Some(ClientAuth::None),
            "want" => Some(ClientAuth::Want),
            "need" => Some(ClientAuth::Need),
            _ => None,
        }
    }
}

impl fmt::Display for ClientAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientAuth::None => "none",
            ClientAuth::Want => "want",
            ClientAuth::Need => "need",
        })
    }
}
