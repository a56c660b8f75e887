//! Key and trust stores in the formats ZooKeeper's operators have: PEM, PKCS#12 and JKS
//! (ZooKeeper's `X509Util`: `ssl.keyStore.*`, `ssl.trustStore.*`).
//!
//! - PEM: a key store holds the private key (PKCS#8, as ZooKeeper's `PemReader`; PKCS#1 and
//!   SEC1 too) and the certificate chain, leaf first; a trust store holds CA certificates.
//! - PKCS#12 (`p12-keystore`): the key with the certificate of the same local key id and its
//!   issuers; as a trust store every certificate not tied to a key.
//! - JKS: read here (`jks`), no maintained crate reads it.

mod jks;

use std::path::Path;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::settings::{Store, StoreType};

/// A server's private key and its certificate chain, leaf first.
#[derive(Debug)]
pub struct KeyMaterial {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

/// Why a store could not be used; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {why}")]
    Bad { path: String, why: String },
    #[error("{0}")]
    Type(#[from] crate::config::InvalidConfig),
}

fn bad(path: &Path, why: impl Into<String>) -> StoreError {
    StoreError::Bad {
        path: path.display().to_string(),
        why: why.into(),
    }
}

fn read(path: &Path) -> Result<Vec<u8>, StoreError> {
    std::fs::read(path).map_err(|source| StoreError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// The key and chain a key store holds.
pub fn load_key(store: &Store) -> Result<KeyMaterial, StoreError> {
    let path = &store.location;
    let bytes = read(path)?;
    let password = store.password.as_deref().unwrap_or("");
    let material = match store.store_type()? {
        StoreType::Pem => pem_key(path, &bytes)?,
        StoreType::Pkcs12 => pkcs12_key(path, &bytes, password)?,
        StoreType::Jks => jks::key(&bytes, password).map_err(|why| bad(path, why))?,
    };
    if material.chain.is_empty() {
        return Err(bad(path, "no certificate for the private key"));
    }
    Ok(material)
}

/// The certificates a trust store holds.
pub fn load_trust(store: &Store) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let path = &store.location;
    let bytes = read(path)?;
    let certs = match store.store_type()? {
        StoreType::Pem => pem_certs(path, &bytes)?,
        StoreType::Pkcs12 => pkcs12_trust(path, &bytes, store.password.as_deref().unwrap_or(""))?,
        StoreType::Jks => {
            jks::trusted(&bytes, store.password.as_deref()).map_err(|why| bad(path, why))?
        }
    };
    if certs.is_empty() {
        return Err(bad(path, "no certificates in the trust store"));
    }
    Ok(certs)
}

fn pem_certs(path: &Path, bytes: &[u8]) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    CertificateDer::pem_slice_iter(bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(path, format!("not PEM: {e}")))
}

fn pem_key(path: &Path, bytes: &[u8]) -> Result<KeyMaterial, StoreError> {
    let chain = pem_certs(path, bytes)?;
    let key = match PrivateKeyDer::from_pem_slice(bytes) {
        Ok(key) => key,
        Err(_) if contains(bytes, b"ENCRYPTED PRIVATE KEY") => {
            return Err(bad(
                path,
                "an encrypted PEM private key, which Warden does not decrypt: use a PKCS#12 \
                 store (openssl pkcs12 -export -inkey key.pem -in cert.pem -out server.p12), or \
                 decrypt the key (openssl pkcs8 -in key.pem -out plain.pem) into a file only \
                 the server may read",
            ));
        }
        Err(e) => return Err(bad(path, format!("no private key: {e}"))),
    };
    Ok(KeyMaterial { chain, key })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn pkcs12(
    path: &Path,
    bytes: &[u8],
    password: &str,
) -> Result<p12_keystore::Pkcs12Archive, StoreError> {
    p12_keystore::Pkcs12Archive::from_pkcs12(bytes, password).map_err(|e| {
        bad(
            path,
            format!("not a PKCS#12 store, or a wrong password: {e}"),
        )
    })
}

fn pkcs12_key(path: &Path, bytes: &[u8], password: &str) -> Result<KeyMaterial, StoreError> {
    let archive = pkcs12(path, bytes, password)?;
    let Some(key) = archive.keys.first() else {
        return Err(bad(path, "no private key in the PKCS#12 store"));
    };
    let certs: Vec<&p12_keystore::Certificate> = archive.certs.iter().map(|c| &c.cert).collect();
    // The leaf is the certificate of the key's local key id (or, lacking one, the first).
    let leaf = archive
        .certs
        .iter()
        .find(|c| {
            key.local_key_id
                .as_ref()
                .is_some_and(|id| c.local_key_id.as_deref() == Some(id.0.as_slice()))
        })
        .or(archive.certs.first())
        .map(|c| &c.cert);
    let mut chain = Vec::new();
    let mut next = leaf;
    while let Some(cert) = next {
        if chain.contains(&cert) || chain.len() > certs.len() {
            break;
        }
        chain.push(cert);
        next = certs
            .iter()
            .copied()
            .find(|c| c.subject() == cert.issuer() && cert.subject() != cert.issuer());
    }
    Ok(KeyMaterial {
        chain: chain
            .iter()
            .map(|c| CertificateDer::from(c.as_der().to_vec()))
            .collect(),
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.key.as_der().to_vec())),
    })
}

fn pkcs12_trust(
    path: &Path,
    bytes: &[u8],
    password: &str,
) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    let archive = pkcs12(path, bytes, password)?;
    Ok(archive
        .certs
        .iter()
        .filter(|c| c.local_key_id.is_none())
        .map(|c| CertificateDer::from(c.cert.as_der().to_vec()))
        .collect())
}
