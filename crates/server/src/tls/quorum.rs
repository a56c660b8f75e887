//! TLS between the servers of a cluster (ZooKeeper's `sslQuorum`, docs/security.md): every
//! server shows its key store's certificate both to the peers it dials and to those that dial
//! it, and checks theirs against its trust store, so a peer without a valid certificate is
//! refused at the handshake whichever side it is on. The dialer also checks that the
//! certificate names the host it dialed, unless `hostname_verification` is off.
//!
//! A peer's certificate is checked as a client's is (`verify`, X.509 v1 included) when it
//! dials, and by webpki when it is dialed (v3 only, as every CA tool makes them today).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::CertifiedKey;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error, ServerConfig, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::{
    ClientAuth, OneCert, QuorumTls, Reloading, TlsError, certified_key, client_verifier, provider,
};
use crate::config::InvalidConfig;

/// The two ends of a peer connection, plain or TLS.
pub type PeerRead = Box<dyn AsyncRead + Send + Sync + Unpin>;
pub type PeerWrite = Box<dyn AsyncWrite + Send + Sync + Unpin>;

/// The contexts of both ends, built together from the same files.
#[derive(Debug)]
struct Contexts {
    accept: Arc<ServerConfig>,
    dial: Arc<ClientConfig>,
}

/// This server's quorum TLS: the current contexts, replaced when the store files change.
pub struct PeerTls {
    settings: QuorumTls,
    current: Reloading<Contexts>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Shows this server's certificate when a peer it dials asks for one. Built directly from the
/// parts for the reason `OneCert` is.
impl ResolvesClientCert for OneCert {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// webpki's check of a dialed peer's certificate, with a name that does not match let pass:
/// `ssl.quorum.hostnameVerification=false`. webpki checks the name last, after the chain, so
/// a name error means everything else held.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

fn build(settings: &QuorumTls) -> Result<Arc<Contexts>, TlsError> {
    let missing = || {
        InvalidConfig(
            "TLS between servers needs ssl.quorum.keyStore.location and \
             ssl.quorum.trustStore.location"
                .into(),
        )
    };
    let key_store = settings.key_store.as_ref().ok_or_else(missing)?;
    let trust_store = settings.trust_store.as_ref().ok_or_else(missing)?;
    let (provider, versions) = provider(&settings.protocols())?;
    let certified = certified_key(&provider, key_store)?;
    let accept = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)?
        .with_client_cert_verifier(client_verifier(&provider, trust_store, false)?)
        .with_cert_resolver(Arc::new(OneCert(certified.clone())));
    let (roots, _) = super::trust_anchors(trust_store)?;
    let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| {
            TlsError::TrustStore(super::StoreError::Bad {
                path: trust_store.location.display().to_string(),
                why: e.to_string(),
            })
        })?;
    let verifier: Arc<dyn ServerCertVerifier> = if settings.hostname_verification {
        webpki
    } else {
        Arc::new(ChainOnly(webpki))
    };
    let dial = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_client_cert_resolver(Arc::new(OneCert(certified)));
    Ok(Arc::new(Contexts {
        accept: Arc::new(accept),
        dial: Arc::new(dial),
    }))
}

/// The admin HTTP server's HTTPS context. Its key store is the quorum one, as ZooKeeper's
/// AdminServer's is; with `need_client_auth` (`admin.needClientAuth`) a client must show a
/// certificate that chains to the quorum trust store.
pub fn https_config(
    settings: &QuorumTls,
    need_client_auth: bool,
) -> Result<Arc<ServerConfig>, TlsError> {
    let key_store = settings.key_store.as_ref().ok_or_else(|| {
        InvalidConfig(
            "HTTPS for the admin server needs ssl.quorum.keyStore.location (TOML: \
             quorum_tls.key_store), the key store ZooKeeper's AdminServer uses"
                .into(),
        )
    })?;
    let client_auth = match (&settings.trust_store, need_client_auth) {
        (_, false) => ClientAuth::None,
        (Some(_), true) => ClientAuth::Need,
        (None, true) => {
            return Err(InvalidConfig(
                "admin.needClientAuth needs ssl.quorum.trustStore.location (TOML: \
                 quorum_tls.trust_store)"
                    .into(),
            )
            .into());
        }
    };
    super::https_server_config(
        key_store,
        settings.trust_store.as_ref(),
        client_auth,
        &settings.protocols(),
    )
}

/// Splits a TLS stream into the boxed halves the peer protocol reads and writes.
fn halves<S: AsyncRead + AsyncWrite + Send + Sync + 'static>(stream: S) -> (PeerRead, PeerWrite) {
    let (read, write) = tokio::io::split(stream);
    (Box::new(read), Box::new(write))
}

impl PeerTls {
    /// Reads the stores and builds both contexts; any failure stops the start.
    pub fn new(settings: &QuorumTls) -> Result<PeerTls, TlsError> {
        Ok(PeerTls {
            settings: settings.clone(),
            current: Reloading::new(
                settings.key_store.iter().chain(&settings.trust_store),
                build(settings)?,
            ),
        })
    }

    /// With `reload_cert_files`, reads the store files again whenever they change. Runs until
    /// the server stops.
    pub async fn reload_on_change(self: Arc<Self>) {
        if self.settings.reload_cert_files {
            self.current
                .follow("TLS between servers", || build(&self.settings))
                .await;
        }
    }

    /// Bound on a handshake, and on the wait for a first byte on a unified port.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.settings.handshake_timeout_ms.into())
    }

    /// The TLS handshake as the dialer, with the peer at `host` (a name or an address).
    pub async fn dial(&self, stream: TcpStream, host: &str) -> io::Result<(PeerRead, PeerWrite)> {
        let name = ServerName::try_from(host.to_owned()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{host:?} cannot be checked against a certificate: {e}"),
            )
        })?;
        let connector = tokio_rustls::TlsConnector::from(self.current.get().dial.clone());
        let stream =
            tokio::time::timeout(self.handshake_timeout(), connector.connect(name, stream))
                .await
                .map_err(|_| timed_out(self.handshake_timeout()))??;
        Ok(halves(stream))
    }

    /// The TLS handshake as the acceptor.
    pub async fn accept(&self, stream: TcpStream) -> io::Result<(PeerRead, PeerWrite)> {
        let acceptor = tokio_rustls::TlsAcceptor::from(self.current.get().accept.clone());
        let stream = tokio::time::timeout(self.handshake_timeout(), acceptor.accept(stream))
            .await
            .map_err(|_| timed_out(self.handshake_timeout()))??;
        Ok(halves(stream))
    }
}

fn timed_out(limit: Duration) -> io::Error {
    io::Error::new(
        io::ErrorKind::TimedOut,
        format!("TLS handshake not done within {} ms", limit.as_millis()),
    )
}
