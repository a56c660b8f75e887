//! zoo.cfg's TLS keys, read as ZooKeeper 3.9 reads them: for the client ports
//! (`QuorumPeerConfig` for `secureClientPort`/`secureClientPortAddress`; `X509Util` and
//! `ClientX509Util` for the `ssl.*` and `client.*` system properties) into
//! [`crate::tls::Tls`], and between servers (`QuorumPeerConfig` for `sslQuorum`,
//! `portUnification` and `sslQuorumReloadCertFiles`; `QuorumX509Util` for `ssl.quorum.*`) into
//! [`crate::tls::QuorumTls`]; and the Prometheus endpoint's HTTPS (ZooKeeper 3.10's
//! `PrometheusMetricsProvider` for `metricsProvider.ssl.*`) into [`crate::tls::MetricsTls`].

use std::path::PathBuf;

use super::properties::Property;
use super::{At, Reader, Warning, WarningKind, java_trim};
use crate::config::{ConfigError, HostPort, WILDCARD_HOST};
use crate::tls::{ClientAuth, Store};

/// The TLS keys that need the whole file to mean anything.
#[derive(Debug, Default)]
pub(super) struct TlsKeys {
    secure_port: Option<At<u16>>,
    secure_address: Option<At<String>>,
    key_store: StoreKeys,
    trust_store: StoreKeys,
    quorum_key_store: StoreKeys,
    quorum_trust_store: StoreKeys,
    metrics_key_store: StoreKeys,
    metrics_trust_store: StoreKeys,
    /// `metricsProvider.ssl.need.client.auth` and `.want.client.auth`.
    metrics_need_client_auth: Option<bool>,
    metrics_want_client_auth: Option<bool>,
    /// The first `metricsProvider.ssl.*` key, and its line: what is warned about when there
    /// is no HTTPS port for them to apply to.
    metrics_first_key: Option<At<String>>,
}

#[derive(Debug, Default)]
struct StoreKeys {
    location: Option<PathBuf>,
    password: Option<String>,
    password_path: Option<At<PathBuf>>,
    kind: Option<String>,
}

impl StoreKeys {
    /// One `<store>.<field>` key; false if `field` is not one.
    fn set(&mut self, field: &str, p: &Property) -> bool {
        match field {
            "location" => self.location = Some(PathBuf::from(&p.value)),
            "password" => self.password = Some(p.value.clone()),
            "passwordPath" => {
                self.password_path = Some(At {
                    value: PathBuf::from(&p.value),
                    line: p.line,
                })
            }
            "type" => self.kind = Some(p.value.clone()),
            _ => return false,
        }
        true
    }
}

impl Reader<'_> {
    /// A top-level TLS key; false if `key` is not one.
    pub(super) fn tls_key(&mut self, key: &str, p: &Property) -> Result<bool, ConfigError> {
        match key {
            "secureClientPort" => self.tls.secure_port = Some(self.at(p, self.port(p, 0)?)),
            "secureClientPortAddress" => {
                self.tls.secure_address = Some(self.at(p, self.host(p)?));
            }
            "sslQuorum" => self.config.quorum_tls.enabled = self.boolean(p)?,
            "portUnification" => self.config.quorum_tls.port_unification = self.boolean(p)?,
            "sslQuorumReloadCertFiles" => {
                self.config.quorum_tls.reload_cert_files = self.boolean(p)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A TLS system property (`zookeeper.` prefix already taken off); false if `name` is not
    /// one.
    pub(super) fn tls_property(&mut self, name: &str, p: &Property) -> Result<bool, ConfigError> {
        if let Some(rest) = name.strip_prefix("ssl.quorum.") {
            return self.quorum_tls_property(rest, p);
        }
        match name {
            "client.portUnification" => self.config.tls.port_unification = self.boolean(p)?,
            "client.certReload" => self.config.tls.reload_cert_files = self.boolean(p)?,
            "ssl.clientAuth" => {
                self.config.tls.client_auth = ClientAuth::parse(&p.value)
                    .ok_or_else(|| self.bad(p, "must be none, want or need"))?;
            }
            "ssl.protocol" => self.config.tls.protocol = p.value.clone(),
            "ssl.enabledProtocols" => self.config.tls.enabled_protocols = list(&p.value),
            "ssl.ciphersuites" => self.config.tls.cipher_suites = list(&p.value),
            "ssl.handshakeDetectionTimeoutMillis" => {
                self.config.tls.handshake_timeout_ms =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            // ZooKeeper 3.9.5 checks the client's host name only with
            // ssl.clientHostnameVerification; this one is for servers and the admin port.
            "ssl.hostnameVerification" | "ssl.allowReverseDnsLookup" => {
                self.boolean(p)?;
            }
            "ssl.clientHostnameVerification" | "ssl.crl" | "ssl.ocsp" => {
                if self.boolean(p)? {
                    return Err(self.bad(
                        p,
                        "not supported: Warden checks client certificates against the trust \
                         store and their validity period only (no host names, CRLs or OCSP)",
                    ));
                }
            }
            "ssl.sslProvider" => {
                if !p.value.eq_ignore_ascii_case("JDK") {
                    self.unsupported(p, "other TLS providers; Warden's TLS is rustls");
                }
            }
            "ssl.authProvider" => {
                if p.value != "x509" {
                    return Err(self.bad(
                        p,
                        "only x509 (the certificate's subject as the client's x509 id)",
                    ));
                }
            }
            "ssl.context.supplier.class" => {
                return Err(self.bad(p, "not supported: Warden builds its TLS context itself"));
            }
            "X509AuthenticationProvider.superUser" => {
                self.config.tls.super_user = Some(p.value.clone());
            }
            _ => {
                let Some((store, field)) = name
                    .strip_prefix("ssl.keyStore.")
                    .map(|f| (&mut self.tls.key_store, f))
                    .or_else(|| {
                        name.strip_prefix("ssl.trustStore.")
                            .map(|f| (&mut self.tls.trust_store, f))
                    })
                else {
                    return Ok(false);
                };
                if !store.set(field, p) {
                    self.warn(p, WarningKind::UnknownKey);
                }
            }
        }
        Ok(true)
    }

    /// An `ssl.quorum.*` system property, `rest` what follows the prefix.
    fn quorum_tls_property(&mut self, rest: &str, p: &Property) -> Result<bool, ConfigError> {
        match rest {
            "protocol" => self.config.quorum_tls.protocol = p.value.clone(),
            "enabledProtocols" => self.config.quorum_tls.enabled_protocols = list(&p.value),
            "ciphersuites" => self.config.quorum_tls.cipher_suites = list(&p.value),
            "hostnameVerification" => {
                self.config.quorum_tls.hostname_verification = self.boolean(p)?;
            }
            "handshakeDetectionTimeoutMillis" => {
                self.config.quorum_tls.handshake_timeout_ms =
                    self.decoded_int(p, 1, i32::MAX.into())? as u32;
            }
            "clientAuth" => {
                if ClientAuth::parse(&p.value) != Some(ClientAuth::Need) {
                    return Err(self.bad(
                        p,
                        "only need: servers always check each other's certificates",
                    ));
                }
            }
            "allowReverseDnsLookup" => {
                self.boolean(p)?;
            }
            "clientHostnameVerification" | "crl" | "ocsp" => {
                if self.boolean(p)? {
                    return Err(self.bad(
                        p,
                        "not supported: Warden checks a peer's certificate against the trust \
                         store, its validity period and, when it dials the peer, its host name \
                         (no CRLs or OCSP)",
                    ));
                }
            }
            "sslProvider" => {
                if !p.value.eq_ignore_ascii_case("JDK") {
                    self.unsupported(p, "other TLS providers; Warden's TLS is rustls");
                }
            }
            "context.supplier.class" => {
                return Err(self.bad(p, "not supported: Warden builds its TLS context itself"));
            }
            _ => {
                let Some((store, field)) = rest
                    .strip_prefix("keyStore.")
                    .map(|f| (&mut self.tls.quorum_key_store, f))
                    .or_else(|| {
                        rest.strip_prefix("trustStore.")
                            .map(|f| (&mut self.tls.quorum_trust_store, f))
                    })
                else {
                    self.warn(p, WarningKind::UnknownKey);
                    return Ok(true);
                };
                if !store.set(field, p) {
                    self.warn(p, WarningKind::UnknownKey);
                }
            }
        }
        Ok(true)
    }

    /// A `metricsProvider.ssl.*` key, as ZooKeeper 3.10's PrometheusMetricsProvider reads it.
    pub(super) fn metrics_tls_key(&mut self, p: &Property) -> Result<(), ConfigError> {
        let rest = &p.key["metricsProvider.ssl.".len()..];
        if self.tls.metrics_first_key.is_none() {
            self.tls.metrics_first_key = Some(self.at(p, p.key.clone()));
        }
        let tls = &mut self.config.metrics.tls;
        match rest {
            "enabledProtocols" => tls.enabled_protocols = list(&p.value),
            "ciphersuites" => tls.cipher_suites = list(&p.value),
            "need.client.auth" => self.tls.metrics_need_client_auth = Some(self.boolean(p)?),
            "want.client.auth" => self.tls.metrics_want_client_auth = Some(self.boolean(p)?),
            _ => {
                let Some((store, field)) = rest
                    .strip_prefix("keyStore.")
                    .map(|f| (&mut self.tls.metrics_key_store, f))
                    .or_else(|| {
                        rest.strip_prefix("trustStore.")
                            .map(|f| (&mut self.tls.metrics_trust_store, f))
                    })
                else {
                    self.warn(p, WarningKind::UnknownKey);
                    return Ok(());
                };
                if !store.set(field, p) {
                    self.warn(p, WarningKind::UnknownKey);
                }
            }
        }
        Ok(())
    }

    /// The metrics endpoint's HTTPS stores and client certificate policy, once the file says
    /// whether it has an HTTPS port (`resolve_endpoints`).
    fn resolve_metrics_tls(&mut self, keys: &mut TlsKeys) -> Result<(), ConfigError> {
        if self.config.metrics.https_listen.is_none() {
            // ZooKeeper reads them only with httpsPort; kept, they would be settings of a
            // port that is not there.
            self.config.metrics.tls = crate::tls::MetricsTls::default();
            if let Some(first) = keys.metrics_first_key.take() {
                self.warnings.push(Warning {
                    path: self.path.to_path_buf(),
                    line: first.line,
                    key: first.value,
                    kind: WarningKind::Unsupported(
                        "metricsProvider.ssl.* apply only with the Prometheus provider and \
                         metricsProvider.httpsPort, as in ZooKeeper",
                    ),
                });
            }
            return Ok(());
        }
        let key_store = self.store(
            std::mem::take(&mut keys.metrics_key_store),
            "metricsProvider.ssl.keyStore",
        )?;
        let trust_store = self.store(
            std::mem::take(&mut keys.metrics_trust_store),
            "metricsProvider.ssl.trustStore",
        )?;
        // ZooKeeper's "secure default": both true, and need wins (Jetty). want with no trust
        // store has nothing to check a certificate against, so none is asked for; need with
        // none is the error `MetricsTls::validate` gives, as ZooKeeper refuses it too.
        let need = keys.metrics_need_client_auth.unwrap_or(true);
        let want = keys.metrics_want_client_auth.unwrap_or(true);
        let tls = &mut self.config.metrics.tls;
        tls.client_auth = match (need, want, &trust_store) {
            (true, _, _) => ClientAuth::Need,
            (false, true, Some(_)) => ClientAuth::Want,
            (false, _, _) => ClientAuth::None,
        };
        tls.key_store = key_store;
        tls.trust_store = trust_store;
        Ok(())
    }

    /// Whether the file names a secure client port and no plain one (ZooKeeper then serves
    /// TLS clients only).
    pub(super) fn tls_only(&self) -> bool {
        self.tls.secure_port.is_some()
            && self.client_port.is_none()
            && self.client_port_address.is_none()
    }

    /// The secure client port's address, and the stores with their passwords.
    pub(super) fn resolve_tls(&mut self) -> Result<(), ConfigError> {
        let tls_only = self.tls_only();
        let mut keys = std::mem::take(&mut self.tls);
        self.resolve_metrics_tls(&mut keys)?;
        match (keys.secure_port, keys.secure_address) {
            (Some(port), address) => {
                let host = address.map_or_else(|| WILDCARD_HOST.to_owned(), |a| a.value);
                let listen = HostPort::new(host, port.value);
                if tls_only {
                    self.config.client_listen = listen;
                    self.config.tls.client_listen_tls_only = true;
                } else {
                    self.config.tls.secure_client_listen = Some(listen);
                }
            }
            (None, Some(address)) => {
                return Err(self.invalid(format!(
                    "secureClientPortAddress is set (line {}) but secureClientPort is not",
                    address.line
                )));
            }
            (None, None) => {}
        }
        self.config.tls.key_store = self.store(keys.key_store, "ssl.keyStore")?;
        self.config.tls.trust_store = self.store(keys.trust_store, "ssl.trustStore")?;
        self.config.quorum_tls.key_store =
            self.store(keys.quorum_key_store, "ssl.quorum.keyStore")?;
        self.config.quorum_tls.trust_store =
            self.store(keys.quorum_trust_store, "ssl.quorum.trustStore")?;
        Ok(())
    }

    fn store(&self, keys: StoreKeys, prefix: &str) -> Result<Option<Store>, ConfigError> {
        let Some(location) = keys.location else {
            return Ok(None);
        };
        // ZooKeeper: the password file wins over the password.
        let password = match keys.password_path {
            Some(path) => {
                let text = std::fs::read_to_string(&path.value).map_err(|e| {
                    self.invalid(format!(
                        "{prefix}.passwordPath (line {}): cannot read {}: {e}",
                        path.line,
                        path.value.display()
                    ))
                })?;
                Some(text.trim_end_matches(['\r', '\n']).to_owned())
            }
            None => keys.password,
        };
        Ok(Some(Store {
            location,
            password,
            kind: keys.kind,
        }))
    }
}

/// A comma-separated list, each item trimmed, empty items left out (ZooKeeper's
/// `getCipherSuites`/`getEnabledProtocols` split on ',').
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|s| java_trim(s).to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}
