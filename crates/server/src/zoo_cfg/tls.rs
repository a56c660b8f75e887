//! zoo.cfg's TLS keys for the client ports, read as ZooKeeper 3.9 reads them
//! (`QuorumPeerConfig` for `secureClientPort`/`secureClientPortAddress`; `X509Util` and
//! `ClientX509Util` for the `ssl.*` and `client.*` system properties) into [`crate::tls::Tls`].

use std::path::PathBuf;

use super::properties::Property;
use super::{At, Reader, WarningKind, java_trim};
use crate::config::{ConfigError, HostPort, WILDCARD_HOST};
use crate::tls::{ClientAuth, Store};

/// The TLS keys that need the whole file to mean anything.
#[derive(Debug, Default)]
pub(super) struct TlsKeys {
    secure_port: Option<At<u16>>,
    secure_address: Option<At<String>>,
    key_store: StoreKeys,
    trust_store: StoreKeys,
}

#[derive(Debug, Default)]
struct StoreKeys {
    location: Option<PathBuf>,
    password: Option<String>,
    password_path: Option<At<PathBuf>>,
    kind: Option<String>,
}

impl Reader<'_> {
    /// A top-level TLS key; false if `key` is not one.
    pub(super) fn tls_key(&mut self, key: &str, p: &Property) -> Result<bool, ConfigError> {
        match key {
            "secureClientPort" => self.tls.secure_port = Some(self.at(p, self.port(p, 0)?)),
            "secureClientPortAddress" => {
                self.tls.secure_address = Some(self.at(p, self.host(p)?));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// A TLS system property (`zookeeper.` prefix already taken off); false if `name` is not
    /// one.
    pub(super) fn tls_property(&mut self, name: &str, p: &Property) -> Result<bool, ConfigError> {
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
                match field {
                    "location" => store.location = Some(PathBuf::from(&p.value)),
                    "password" => store.password = Some(p.value.clone()),
                    "passwordPath" => {
                        store.password_path = Some(At {
                            value: PathBuf::from(&p.value),
                            line: p.line,
                        })
                    }
                    "type" => store.kind = Some(p.value.clone()),
                    _ => self.warn(p, WarningKind::UnknownKey),
                }
            }
        }
        Ok(true)
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
        let keys = std::mem::take(&mut self.tls);
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
